"""Full-scale stand-ins of the real benchmarks: their real annotation files,
with generated features and word vectors in the real layouts and file names.

No feature file or GloVe file can be downloaded here, so this plants a
signal instead (docs/data.md §8.2): every frequent content word of
the benchmark's sentences has a fixed random pattern in feature space, and
the clips inside each annotated moment carry the sum of the patterns of its
sentence's words on top of noise. Word vectors are random but fixed per word.
A model must learn which words go with which patterns to localise a moment;
the counts, lengths and positions of the moments are the real ones.
"""
import hashlib
import json
import os
import shutil
from collections import Counter

import h5py
import numpy as np

from ..errors import TanError
from ..utils.io import atomic_write_text, replaced_when_done
from ..utils.logger import get_logger
from .annotations import load_annotations
from .text import tokenize

# Per benchmark: where the real annotation files are under the shared folder,
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


def _pattern(word, dim):
    v = np.random.default_rng(_word_seed(word, "pattern")).normal(size=dim)
    return v / np.linalg.norm(v)


def _word_vector(word):
    return np.random.default_rng(_word_seed(word, "vector")).normal(scale=0.4, size=WORD_DIM)


def make_standin(benchmark, source_dir, root, dim=None, seed=0, clips_per_second=None):
    """Write the stand-in of ``benchmark`` under ``root`` from the real annotation files in ``source_dir``."""
    if benchmark not in BENCHMARKS:
        raise TanError(f"unknown benchmark {benchmark!r}; expected one of {', '.join(BENCHMARKS)}")
    spec = BENCHMARKS[benchmark]
    dim = dim or spec["dim"]
    rate = clips_per_second or spec["clips_per_second"]
    logger = get_logger("standin")
    videos, sentences = _copy_annotations(spec, source_dir, root)

    counts = Counter(t for s in sentences for t in tokenize(s))
    content = [w for w, _ in counts.most_common() if w not in STOPWORDS and w.isalpha()]
    signal_words = set(content[:SIGNAL_WORDS])
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


def _copy_annotations(spec, source_dir, root):
    """Copy the real annotation files under ``root``; ({video: {duration, moments}}, all sentences)."""
    videos, sentences = {}, []
    for split in spec["splits"]:
        source = os.path.join(source_dir, spec["source"].format(split=split))
        if not os.path.isfile(source):
            raise TanError(f"real annotation file {source!r} not found")
        target = os.path.join(root, spec["annotations"].format(split=split))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(source, target)
        queries, _ = load_annotations(source, spec["format"])
        for q in queries:
            videos.setdefault(q.video, {"duration": q.duration, "moments": []})["moments"].append(q)
            sentences.append(q.sentence)
    return videos, sentences


def _write_features(path, videos, feature_key, dim, rate, rng, patterns):
    """Noise clips per video (in sorted order, one ``rng`` for all: the file is
    reproducible), with each moment's signal-word patterns planted in its clips."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    noise_norm = np.sqrt(dim)
    with replaced_when_done(path) as tmp, h5py.File(tmp, "w") as h5:
        for video in sorted(videos):
            info = videos[video]
            num_clips = max(1, int(round(info["duration"] * rate)))
            feats = rng.normal(size=(num_clips, dim)).astype(np.float32)
            feats += rng.normal(scale=0.5, size=dim).astype(np.float32)  # the video's own look
            centres = (np.arange(num_clips) + 0.5) * info["duration"] / num_clips
            for q in info["moments"]:
                words = [w for w in set(tokenize(q.sentence)) if w in patterns]
                if not words:
                    continue
                signal = np.sum([patterns[w] for w in words], axis=0)
                signal *= SIGNAL_NORM * noise_norm / np.linalg.norm(signal)
                inside = (centres >= q.start) & (centres < q.end)
                if not inside.any():  # a moment shorter than a clip still marks its clip
                    inside[min(int(q.start / info["duration"] * num_clips), num_clips - 1)] = True
                feats[inside] += signal.astype(np.float32)
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
