"""Full-scale stand-ins of the real benchmarks: their real annotation files,
with generated features and word vectors in the real layouts and file names.

No feature file or GloVe file can be downloaded here, so this plants a
signal instead (docs/data.md §8.2): every frequent content word of
the benchmark's sentences has a fixed random pattern in feature space, and
the clips inside each annotated moment carry the sum of the patterns of its
sentence's words on top of noise. Word vectors are random but fixed per word.
A model must learn which words go with which patterns to localise a moment;
the counts, lengths and positions of the moments are the real ones.

Two layouts are written:

* "reference" (:func:`make_standin`): 2D-TAN's files, the annotation files
  copied as they are, one HDF5 feature file and a GloVe text file.
* "lighthouse" (:func:`make_lighthouse_standin`, docs/data.md §9): the files
  of the built-in ``*_lighthouse_*`` datasets. The annotations become
  JSON lines (qid, query, duration, vid, relevant_windows); the features are
  two streams, ``clip`` and ``slowfast``, one float16 ``{vid}.npz`` per video
  each, T = ceil(duration / clip length) rows (SlowFast one row more or less
  on some videos, as in the real releases); each query's sentence is a
  float16 ``last_hidden_state`` [tokens + 2, E] in ``clip_text``. Every signal
  word has a pattern in each stream, planted in both, so a model can use
  either stream and gains from both; a sentence's token rows are fixed
  vectors of its words (plus a little noise), from which the model learns
  which patterns to look for. lighthouse's conventions are kept: integer
  qids counted on from train into the later splits for Charades-STA and
  ActivityNet (text files ``qid{qid}.npz``), ``"{vid}_{k}"`` for TACoS (text
  files ``{qid}.npz``, videos without ".avi"); clips of 1 s for
  Charades-STA, 2 s for TACoS and ActivityNet.

  Splits: lighthouse's split of each name is converted from the real
  annotation file of the same name. For ActivityNet, lighthouse has train and
  val, its val being ActivityNet Captions' val_1: data/annotations holds
  2D-TAN's split, whose val.json is val_1 (17505 queries) and whose
  test.json is val_2, so lighthouse's val is made from val.json and test.json
  is not used.
"""
import dataclasses
import hashlib
import json
import math
import os
import shutil
import zipfile
from collections import Counter

import h5py
import numpy as np

from tan.data.catalog import BUILTIN_DATASETS, LIGHTHOUSE_STREAMS, builtin_entries
from tan.data.formats import load_annotations
from tan.data.formats.common import read_text
from tan.data.formats.common import Query
from tan.data.tokens import tokenize
from tan.evaluation.detr_metrics import CLIP_SECONDS  # QVHighlights' clip: the saliency labels' and the streams'
from tan.errors import TanError
from tan.utils.io import atomic_write_text, replaced_when_done
from tan.utils.logger import get_logger

# Per benchmark: where the real annotation files are in their folder (data/annotations),
# where they go under DATASETS.ROOT, the feature file, its layout and size.
BENCHMARKS = {
    "tacos": {
        "source": "tacos/{split}.json", "splits": ("train", "val", "test"), "format": "tacos",
        "annotations": "tacos/annotations/{split}.json",
        "features": "tacos/features/tall_c3d_features.hdf5", "feature_key": None, "dim": 4096,
        "clips_per_second": 29.4 / 16,  # C3D over 16-frame windows
    },
    "activitynet": {
        "source": "activitynet/{split}.json", "splits": ("train", "val", "test"), "format": "seconds",
        "annotations": "activitynet1.3/annotations/{split}.json",
        "features": "activitynet1.3/features/activitynet_v1-3_c3d.hdf5", "feature_key": "c3d_features",
        "dim": 500, "clips_per_second": 1.0,
    },
    "charades": {
        "source": "charades_sta/charades_{split}.json", "splits": ("train", "test"), "format": "seconds",
        "annotations": "charades_sta/annotations/charades_{split}.json",
        "features": "charades_sta/features/vgg_rgb_features.hdf5", "feature_key": None, "dim": 4096,
        "clips_per_second": 4.0,
    },
}
WORD_VECTORS = "glove/glove.840B.300d.txt"
WORD_DIM = 300
SIGNAL_WORDS = 1000  # the most frequent content words carry a pattern
SIGNAL_NORM = 1.0  # a moment's planted signal, relative to the noise of a clip
STOPWORDS = set("""a an the and or of to in on at by for with from into onto up down out over then
    is are was were be been being it its he she they him her his their them this that these those there
    while as also again after before when who which what person man woman men women people someone
    one two some another other others . , ' 's " ? ! - ;""".split())


def _word_seed(word, salt):
    return int.from_bytes(hashlib.sha1(f"{salt}:{word}".encode()).digest()[:8], "little")


def _pattern(word, dim, salt="pattern"):
    v = np.random.default_rng(_word_seed(word, salt)).normal(size=dim)
    return v / np.linalg.norm(v)


def _word_vector(word):
    return np.random.default_rng(_word_seed(word, "vector")).normal(scale=0.4, size=WORD_DIM)


def make_standin(benchmark, source_dir, root, dim=None, seed=0, clips_per_second=None, videos_per_split=None):
    """Write the stand-in of ``benchmark`` under ``root`` from the real annotation files in ``source_dir``
    (the reference layout); ``videos_per_split``: keep only the first that many videos (by id) of each split."""
    if benchmark not in BENCHMARKS:
        raise TanError(f"unknown benchmark {benchmark!r}; expected one of {', '.join(BENCHMARKS)}")
    _check_positive("videos per split", videos_per_split)
    spec = BENCHMARKS[benchmark]
    dim = dim or spec["dim"]
    rate = clips_per_second or spec["clips_per_second"]
    logger = get_logger("standin")
    videos, sentences = _copy_annotations(spec, source_dir, root, videos_per_split)

    counts, signal_words = _signal_words(sentences)
    patterns = {w: _pattern(w, dim) for w in signal_words}
    path = os.path.join(root, spec["features"])
    _write_features(path, videos, spec["feature_key"], dim, rate, np.random.default_rng(seed), patterns)

    vocab = sorted(counts)
    lines = [w + " " + " ".join(f"{x:.4f}" for x in _word_vector(w)) for w in vocab]
    atomic_write_text(os.path.join(root, WORD_VECTORS), "\n".join(lines) + "\n")
    atomic_write_text(os.path.join(root, f"{benchmark}_standin.json"), json.dumps(
        {"benchmark": benchmark, "videos": len(videos), "queries": len(sentences), "dim": dim,
         "clips_per_second": rate, "signal_words": len(signal_words), "vocabulary": len(vocab)}, indent=2))
    logger.info("%s stand-in: %d videos, %d queries, %d-d features, %d signal words, in %s",
                benchmark, len(videos), len(sentences), dim, len(signal_words), root)
    return path


def _check_positive(what, value):
    """None (no limit / the default) or a positive integer, else a TanError naming ``what``."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise TanError(f"{what}: expected a positive integer, got {value!r}")


def _signal_words(sentences):
    """(Counter of the tokens of ``sentences``, the set of the SIGNAL_WORDS most frequent content words)."""
    counts = Counter(t for s in sentences for t in tokenize(s))
    content = [w for w, _ in counts.most_common() if w not in STOPWORDS and w.isalpha()]
    return counts, set(content[:SIGNAL_WORDS])


def _source_file(source_dir, spec, split):
    """The real annotation file of ``split`` in ``source_dir``: as the release names it, or gzip-compressed
    (``.json.gz``, as data/annotations keeps it)."""
    source = os.path.join(source_dir, spec["source"].format(split=split))
    for path in (source, source + ".gz"):
        if os.path.isfile(path):
            return path
    raise TanError(f"real annotation file {source!r} not found (nor {os.path.basename(source)}.gz)")


def _copy_annotations(spec, source_dir, root, videos_per_split=None):
    """Copy the real annotation files under ``root`` (with ``videos_per_split``: only the first that many
    videos of each); ({video: {duration, moments}}, all sentences)."""
    videos, sentences = {}, []
    for split in spec["splits"]:
        source = _source_file(source_dir, spec, split)
        target = os.path.join(root, spec["annotations"].format(split=split))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if videos_per_split is None and not source.endswith(".gz"):
            shutil.copyfile(source, target)
        else:
            _write_first_videos(source, target, videos_per_split)
        queries, _ = load_annotations(target, spec["format"])
        for q in queries:
            videos.setdefault(q.video, {"duration": q.duration, "moments": []})["moments"].append(q)
            sentences.append(q.sentence)
    return videos, sentences


def _write_first_videos(source, target, count=None):
    """``target``: the JSON annotation file ``source`` (compressed or not) with only its first ``count``
    videos by id (all, as they are, without ``count``)."""
    text = read_text(source)
    if count is None:
        atomic_write_text(target, text)
        return
    data = json.loads(text)
    if not isinstance(data, dict):
        raise TanError(f"annotation file {source!r}: expected an object mapping video ids to annotations")
    atomic_write_text(target, json.dumps({video: data[video] for video in sorted(data)[:count]}))


def _planted_features(info, num_clips, dim, rng, patterns):
    """[num_clips, dim] float32 noise clips of one video spanning ``info["duration"]``, with the
    patterns of each moment's signal words planted in the clips of its windows. Draws from ``rng``
    in a fixed order, so one ``rng`` over the videos in a fixed order makes reproducible files."""
    noise_norm = np.sqrt(dim)
    feats = rng.normal(size=(num_clips, dim)).astype(np.float32)
    feats += rng.normal(scale=0.5, size=dim).astype(np.float32)  # the video's own look
    centres = (np.arange(num_clips) + 0.5) * info["duration"] / num_clips
    for q in info["moments"]:
        # Sorted: the sum's float rounding must not depend on the set's (hash-seeded) order.
        words = sorted(w for w in set(tokenize(q.sentence)) if w in patterns)
        if not words:
            continue
        signal = np.sum([patterns[w] for w in words], axis=0)
        signal *= SIGNAL_NORM * noise_norm / np.linalg.norm(signal)
        for start, end in q.moments:
            inside = (centres >= start) & (centres < end)
            if not inside.any():  # a moment shorter than a clip still marks its clip
                inside[min(int(start / info["duration"] * num_clips), num_clips - 1)] = True
            feats[inside] += signal.astype(np.float32)
    return feats


def _write_features(path, videos, feature_key, dim, rate, rng, patterns):
    """Noise clips per video (in sorted order, one ``rng`` for all: the file is
    reproducible), with each moment's signal-word patterns planted in its clips."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with replaced_when_done(path) as tmp, h5py.File(tmp, "w") as h5:
        for video in sorted(videos):
            info = videos[video]
            num_clips = max(1, int(round(info["duration"] * rate)))
            feats = _planted_features(info, num_clips, dim, rng, patterns)
            if feature_key:
                h5.create_group(video).create_dataset(feature_key, data=feats)
            else:
                h5.create_dataset(video, data=feats)


def write_charades_text_form(root):
    """Charades-STA's original text form next to its JSON stand-in files:
    charades_sta_{split}.txt and Charades_v1_{split}.csv (id, length)."""
    folder = os.path.join(root, "charades_sta", "annotations")
    for split in BENCHMARKS["charades"]["splits"]:
        with open(os.path.join(folder, f"charades_{split}.json")) as f:
            data = json.load(f)
        lines, rows = [], ["id,length"]
        for video, info in data.items():
            rows.append(f"{video},{info['duration']}")
            for (start, end), sentence in zip(info["timestamps"], info["sentences"]):
                lines.append(f"{video} {start} {end}##{sentence}")
        atomic_write_text(os.path.join(folder, f"charades_sta_{split}.txt"), "\n".join(lines) + "\n")
        atomic_write_text(os.path.join(folder, f"Charades_v1_{split}.csv"), "\n".join(rows) + "\n")


# The lighthouse layout (docs/data.md §9). Per benchmark: lighthouse's split ->
# the real annotations' split it is made from, the seconds one feature row
# covers, how queries are numbered and how a query's text file is named.
LIGHTHOUSE = {
    "charades": {"splits": {"train": "train", "test": "test"}, "clip_seconds": 1.0,
                 "qids": "counted", "text_file": "qid{qid}.npz"},
    "tacos": {"splits": {"train": "train", "val": "val", "test": "test"}, "clip_seconds": 2.0,
              "qids": "per_video", "text_file": "{qid}.npz"},
    # val is ActivityNet Captions' val_1, the real val.json; its test.json (val_2) is unused.
    "activitynet": {"splits": {"train": "train", "val": "val"}, "clip_seconds": 2.0,
                    "qids": "counted", "text_file": "qid{qid}.npz"},
}
# The real releases' sizes: CLIP ViT-B/32 frames, SlowFast R101, CLIP token features.
LIGHTHOUSE_DIMS = {"clip": 512, "slowfast": 2304, "text": 512}
# Rows the SlowFast stream has beyond CLIP's, one drawn per video: the real
# streams differ by a row on some videos, which the loader resamples away.
SLOWFAST_EXTRA_ROWS = (-1, 0, 0, 1)
TEXT_NOISE = 0.1  # a token row's noise, relative to its word's vector (norm 1)
START_TOKEN, END_TOKEN = "<|startoftext|>", "<|endoftext|>"  # the rows CLIP puts around a sentence
# np.savez stamps each array in the zip with the time of writing; a fixed stamp keeps files reproducible.
ZIP_TIME = (1980, 1, 1, 0, 0, 0)


def make_lighthouse_standin(benchmark, source_dir, root, dims=None, seed=0, videos_per_split=None):
    """Write the lighthouse-layout stand-in of ``benchmark`` under ``root``, at exactly the paths of the
    built-in ``{benchmark}_lighthouse_*`` datasets, from the real annotation files in ``source_dir``.

    ``dims``: {"clip", "slowfast", "text"} -> size (default LIGHTHOUSE_DIMS, the real ones);
    ``videos_per_split``: keep only the first that many videos (by id) of each split. Returns the
    summary written to ``{benchmark}_lighthouse_standin.json``."""
    if benchmark not in LIGHTHOUSE:
        raise TanError(f"unknown benchmark {benchmark!r}; expected one of {', '.join(LIGHTHOUSE)}")
    dims = _lighthouse_dims(dims)
    _check_positive("videos per split", videos_per_split)
    spec = LIGHTHOUSE[benchmark]
    entries = _lighthouse_entries(benchmark)
    splits = _lighthouse_queries(benchmark, source_dir, videos_per_split)
    for split, queries in splits.items():
        _write_jsonl(entries[split]["annotations"], queries, root)

    queries = [q for split_queries in splits.values() for q in split_queries]
    videos = _moments_by_video(queries)
    counts, signal_words = _signal_words(q.sentence for q in queries)
    first = next(iter(entries.values()))  # the feature and text folders are shared by the splits
    streams = dict(zip(LIGHTHOUSE_STREAMS, (os.path.join(root, path) for path in first["features"])))
    _write_streams(streams, videos, dims, spec["clip_seconds"], signal_words, np.random.default_rng(seed))
    _write_sentence_features(os.path.join(root, first["text_features"]), spec["text_file"], queries,
                             dims["text"], np.random.default_rng([seed, 1]))

    summary = {"benchmark": benchmark, "layout": "lighthouse", "videos": len(videos), "queries": len(queries),
               "queries_per_split": {split: len(q) for split, q in splits.items()},
               "dims": dims, "clip_seconds": spec["clip_seconds"], "signal_words": len(signal_words),
               "vocabulary": len(counts), "seed": seed, "videos_per_split": videos_per_split}
    atomic_write_text(os.path.join(root, f"{benchmark}_lighthouse_standin.json"), json.dumps(summary, indent=2))
    get_logger("standin").info(
        "%s lighthouse stand-in: %d videos, %d queries, clip %d-d + slowfast %d-d features, %d-d text, "
        "%d signal words, in %s", benchmark, len(videos), len(queries), dims["clip"], dims["slowfast"],
        dims["text"], len(signal_words), root)
    return summary


def _lighthouse_dims(dims):
    """LIGHTHOUSE_DIMS updated with ``dims`` (None values keep the real size), each checked."""
    dims = dict(LIGHTHOUSE_DIMS, **{k: v for k, v in (dims or {}).items() if v is not None})
    unknown = set(dims) - set(LIGHTHOUSE_DIMS)
    if unknown:
        raise TanError(f"unknown stand-in dimensions {sorted(unknown)}; expected {sorted(LIGHTHOUSE_DIMS)}")
    for name, value in dims.items():
        _check_positive(f"{name} dimension", value)
    return dims


def _lighthouse_entries(benchmark):
    """{lighthouse split: the built-in catalog entry (paths relative to DATASETS.ROOT)}."""
    splits, _ = BUILTIN_DATASETS[f"{benchmark}_lighthouse"]
    if set(splits) != set(LIGHTHOUSE[benchmark]["splits"]):  # the two tables must name the same splits
        raise TanError(f"{benchmark}: the catalog's lighthouse splits {splits} differ from the stand-in's "
                       f"{tuple(LIGHTHOUSE[benchmark]['splits'])}")
    entries = builtin_entries()
    return {split: entries[f"{benchmark}_lighthouse_{split}"] for split in splits}


def _lighthouse_video(video):
    """lighthouse's video id: TACoS's without the ".avi" of 2D-TAN's files."""
    return video[:-len(".avi")] if video.endswith(".avi") else video


def _lighthouse_queries(benchmark, source_dir, videos_per_split):
    """{lighthouse split: its queries with lighthouse's video ids and qids}, in the splits' order."""
    spec, reference = LIGHTHOUSE[benchmark], BENCHMARKS[benchmark]
    splits, next_qid = {}, 0
    for split, source_split in spec["splits"].items():
        queries, _ = load_annotations(_source_file(source_dir, reference, source_split), reference["format"])
        if videos_per_split is not None:
            kept = set(sorted({q.video for q in queries})[:videos_per_split])
            queries = [q for q in queries if q.video in kept]
        queries = [dataclasses.replace(q, video=_lighthouse_video(q.video)) for q in queries]
        if spec["qids"] == "counted":  # integers, unique over the splits: train's first, then on
            queries = [dataclasses.replace(q, qid=next_qid + k) for k, q in enumerate(queries)]
            next_qid += len(queries)
        else:
            queries = _qids_per_video(queries)
        splits[split] = queries
    return splits


def _qids_per_video(queries):
    """The queries with qids "{vid}_{k}", k counting each video's queries from 0 (TACoS in lighthouse)."""
    seen = Counter()
    numbered = []
    for q in queries:
        numbered.append(dataclasses.replace(q, qid=f"{q.video}_{seen[q.video]}"))
        seen[q.video] += 1
    return numbered


def _write_jsonl(relative_path, queries, root):
    """One lighthouse JSON line per query, keys in lighthouse's order."""
    lines = [json.dumps({"qid": q.qid, "query": q.sentence, "duration": q.duration, "vid": q.video,
                         "relevant_windows": [list(w) for w in q.moments]}) for q in queries]
    atomic_write_text(os.path.join(root, relative_path), "".join(line + "\n" for line in lines))


def _moments_by_video(queries):
    """{video: {duration, moments}}, as _planted_features reads them."""
    videos = {}
    for q in queries:
        videos.setdefault(q.video, {"duration": q.duration, "moments": []})["moments"].append(q)
    return videos


def _write_streams(folders, videos, dims, clip_seconds, signal_words, rng):
    """``{vid}.npz`` of every video in each stream's folder, float16 under key "features". Each stream has
    its own pattern per signal word, planted in the moments' clips, so both streams carry the signal."""
    patterns = {stream: {w: _pattern(w, dims[stream], salt=f"pattern:{stream}") for w in signal_words}
                for stream in folders}
    for folder in folders.values():
        os.makedirs(folder, exist_ok=True)
    for video in sorted(videos):  # one rng over a fixed order: reproducible files
        info = videos[video]
        clip_rows = max(1, math.ceil(info["duration"] / clip_seconds))
        rows = {"clip": clip_rows,
                "slowfast": max(1, clip_rows + SLOWFAST_EXTRA_ROWS[rng.integers(len(SLOWFAST_EXTRA_ROWS))])}
        for stream, folder in folders.items():
            feats = _planted_features(info, rows[stream], dims[stream], rng, patterns[stream])
            _save_npz(os.path.join(folder, f"{video}.npz"), "features", feats.astype(np.float16))


def _text_vector(word, dim):
    """A token's fixed row (norm 1): the same word gives the same row in every sentence."""
    v = np.random.default_rng(_word_seed(word, "text")).normal(size=dim)
    return v / np.linalg.norm(v)


def _token_features(sentence, dim, rng):
    """[tokens + 2, dim] float16: a start row, one row per token of ``sentence``, an end row, each its
    token's fixed vector plus noise of norm about TEXT_NOISE."""
    tokens = [START_TOKEN, *tokenize(sentence), END_TOKEN]
    rows = np.stack([_text_vector(t, dim) for t in tokens])
    rows += rng.normal(scale=TEXT_NOISE / np.sqrt(dim), size=rows.shape)
    return rows.astype(np.float16)


def _write_sentence_features(folder, file_name, queries, dim, rng):
    """One file per query, named by ``file_name`` ("qid{qid}.npz" or "{qid}.npz"), key "last_hidden_state"."""
    os.makedirs(folder, exist_ok=True)
    for q in queries:  # one rng over the queries in the splits' order: reproducible files
        _save_npz(os.path.join(folder, file_name.format(qid=q.qid)), "last_hidden_state",
                  _token_features(q.sentence, dim, rng))


def _save_npz(path, key, array):
    """``array`` as ``key`` of the .npz ``path``, laid out as np.savez does but with a fixed time stamp
    (the same array gives the same bytes), written beside ``path`` and renamed over it when complete."""
    member = zipfile.ZipInfo(f"{key}.npy", date_time=ZIP_TIME)
    with replaced_when_done(path) as tmp:
        with zipfile.ZipFile(tmp, "w") as archive, archive.open(member, "w", force_zip64=True) as f:
            np.lib.format.write_array(f, np.asarray(array), allow_pickle=False)


# QVHighlights: no annotation file of it is at hand, so the stand-in's queries are generated too, with the
# release's shapes: videos of at most 150 s cut from longer ones ("{youtube id}_{start}_{end}"), 2-second
# clips, windows on clip bounds (one to three per query), the clips inside them scored 0..4 by three
# annotators, integer qids, and a test split without its labels. Sentences are drawn from a small grammar
# whose content words carry the planted signal.
QVHIGHLIGHTS_QUERIES = {"train": 7218, "val": 1550, "test": 1542}  # the release's counts
QVHIGHLIGHTS_DURATIONS = (150, 150, 150, 150, 150, 150, 126, 138, 144, 98)
_SUBJECTS = ("a man", "a woman", "a girl", "a boy", "a chef", "a family", "a teenager", "a vlogger")
_ACTIONS = ("cooks pasta", "plays guitar", "walks on the beach", "drives a car", "shoots a basketball",
            "paints a wall", "rides a bike", "talks to the camera", "feeds a dog", "swims in a pool",
            "opens a present", "climbs a rock", "dances in the kitchen", "shops for shoes", "builds a snowman")
_PLACES = ("", " at night", " in the rain", " outside", " with friends", " on a boat", " in a city")
HIDDEN_TEST_FIELDS = ("relevant_windows", "relevant_clip_ids", "saliency_scores")


def make_qvhighlights_standin(root, dims=None, seed=0, queries_per_split=None):
    """Write a generated QVHighlights stand-in under ``root`` at the paths of the built-in
    ``qvhighlight_lighthouse_*`` datasets: highlight_{train,val,test}_release.jsonl (test without
    relevant_windows, relevant_clip_ids and saliency_scores, as released), the clip and slowfast
    streams, and clip_text/qid{qid}.npz. ``queries_per_split``: {split: count} (default: the
    release's). Returns the summary written to qvhighlight_lighthouse_standin.json."""
    dims = _lighthouse_dims(dims)
    counts = dict(QVHIGHLIGHTS_QUERIES, **(queries_per_split or {}))
    for split, count in counts.items():
        if split not in QVHIGHLIGHTS_QUERIES:
            raise TanError(f"unknown QVHighlights split {split!r}; expected one of {', '.join(QVHIGHLIGHTS_QUERIES)}")
        _check_positive(f"{split} queries", count)
    rng = np.random.default_rng(seed)
    splits, next_qid = {}, 0
    for split, count in counts.items():
        splits[split] = [_qvh_query(rng, next_qid + k) for k in range(count)]
        next_qid += count
    entries = {split: builtin_entries()[f"qvhighlight_lighthouse_{split}"] for split in splits}
    for split, records in splits.items():
        hidden = HIDDEN_TEST_FIELDS if split == "test" else ()
        lines = [json.dumps({k: v for k, v in r.items() if k not in hidden}) for r, _ in records]
        atomic_write_text(os.path.join(root, entries[split]["annotations"]), "".join(line + "\n" for line in lines))
    queries = [q for records in splits.values() for _, q in records]
    videos = _moments_by_video(queries)
    _, signal_words = _signal_words(q.sentence for q in queries)
    first = entries["train"]
    streams = dict(zip(LIGHTHOUSE_STREAMS, (os.path.join(root, path) for path in first["features"])))
    _write_streams(streams, videos, dims, CLIP_SECONDS, signal_words, np.random.default_rng([seed, 2]))
    _write_sentence_features(os.path.join(root, first["text_features"]), "qid{qid}.npz", queries, dims["text"],
                             np.random.default_rng([seed, 1]))
    summary = {"benchmark": "qvhighlight", "layout": "lighthouse", "videos": len(videos), "queries": len(queries),
               "queries_per_split": {split: len(r) for split, r in splits.items()}, "dims": dims,
               "clip_seconds": CLIP_SECONDS, "signal_words": len(signal_words), "seed": seed,
               "test_labels": "left out, as in the release"}
    atomic_write_text(os.path.join(root, "qvhighlight_lighthouse_standin.json"), json.dumps(summary, indent=2))
    get_logger("standin").info("QVHighlights stand-in: %d videos, %d queries (%s), in %s", len(videos), len(queries),
                               ", ".join(f"{s} {len(r)}" for s, r in splits.items()), root)
    return summary


def _qvh_query(rng, qid):
    """(the release's record, the Query the features are planted from) of one generated query on its own video."""
    duration = int(rng.choice(QVHIGHLIGHTS_DURATIONS))
    clips = int(duration // CLIP_SECONDS)
    youtube = "".join(rng.choice(list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"), 11))
    start = float(150 * rng.integers(0, 20))
    video = f"{youtube}_{start:.1f}_{start + 150:.1f}"
    windows = _qvh_windows(rng, clips)
    sentence = (f"{rng.choice(_SUBJECTS)} {rng.choice(_ACTIONS)}{rng.choice(_PLACES)}.").capitalize()
    clip_ids = [c for a, b in windows for c in range(a, b)]
    # each annotator: a level per window, a little noise per clip; clips of the window's middle score higher
    scores = []
    for a, b in windows:
        level = rng.integers(1, 5, size=3)
        for c in range(a, b):
            middle = 1 if abs(c - (a + b - 1) / 2) <= (b - a) / 4 else 0
            scores.append([int(x) for x in np.clip(level + middle - rng.integers(0, 2, size=3), 0, 4)])
    seconds = [[int(a * CLIP_SECONDS), int(b * CLIP_SECONDS)] for a, b in windows]
    record = {"qid": qid, "query": sentence, "duration": duration, "vid": video, "relevant_windows": seconds,
              "relevant_clip_ids": clip_ids, "saliency_scores": scores}
    query = Query(video, float(duration), seconds[0][0], seconds[0][1], sentence, qid=str(qid),
                  moments=tuple(tuple(w) for w in seconds))
    return record, query


def _qvh_windows(rng, clips):
    """One to three disjoint windows [first clip, end clip) on clip bounds, in time order, about a quarter of
    the video in all (QVHighlights' moments average about 24 s of 150)."""
    count = int(rng.choice((1, 1, 1, 2, 2, 3)))
    cuts = np.sort(rng.choice(np.arange(1, clips), size=2 * count, replace=False))
    windows = []
    for a, b in cuts.reshape(count, 2):
        length = max(1, min(int(b - a), int(rng.integers(2, 20))))
        windows.append((int(a), int(a) + length))
    return windows
