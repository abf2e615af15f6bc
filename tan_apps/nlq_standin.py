"""A generated stand-in of Ego4D NLQ (docs/long_videos.md, "Ego4D NLQ"): its files in the release's
layout, at about its size, with planted features, so that its configs train and test here.

No Ego4D file can be downloaded here. This writes, under DATASETS.ROOT:

* ``ego4d/annotations/nlq_{train,val}.json``: videos, their 8-minute clips, annotations and
  language queries as the release lays them out (a query's window in the clip's and the
  video's seconds, its template and sentence); sentences in the style of the benchmark's
  templates ("where did I put the knife?"); about one window in seven of no length and a few
  queries without a sentence, as in the release;
* ``ego4d/features/slowfast/{video_uid}.pt``: per-video features at SlowFast's 30/16 rows a
  second, noise with each query's words' patterns planted in its window (the stand-ins'
  signal, tan_apps/standin.py);
* ``ego4d/features/nlq_clips.hdf5``: the clips cut from them (tan_apps/converters/ego4d_nlq.py),
  which the built-in ``ego4d_nlq_*`` datasets read;
* ``glove/glove.840B.300d.txt``: word vectors of the sentences' words.
"""
import json
import os

import numpy as np
import torch

from tan.data.catalog import builtin_entries
from tan.data.formats.common import Query
from tan.errors import TanError
from tan.utils.io import atomic_torch_save, atomic_write_text
from tan.utils.logger import get_logger

from .converters.ego4d_nlq import SLOWFAST_RATE, cut_nlq_clips
from .standin import WORD_VECTORS, _pattern, _planted_features, _signal_words, _word_vector

# Clips per split: the v1 release's order of size (about 11.3k training and 3.9k validation queries,
# some 9 per 8-minute clip).
NLQ_CLIPS = {"train": 1255, "val": 430}
CLIP_SECONDS = 480.0
QUERIES_PER_CLIP = 9
EMPTY_WINDOWS = 1 / 7  # the release's share of windows of no length
NO_SENTENCE = 0.01
DIM = 2304  # SlowFast's
VIDEO_FOLDER = "ego4d/features/slowfast"

_OBJECTS = ("knife", "phone", "keys", "cup", "bowl", "towel", "bottle", "box", "pan", "spoon", "bag", "wallet",
            "screwdriver", "hammer", "brush", "plate", "lid", "shirt", "shoe", "book", "remote", "glove", "tape",
            "bucket", "paper", "scissors", "tray", "jar", "cloth", "drill")
_VERBS = ("pick", "drop", "wash", "cut", "open", "close", "hold", "move", "clean", "fold", "throw", "fill")
_PLACES = ("kitchen", "garage", "garden", "shop", "living room", "workshop", "car", "yard", "office", "street")
_TEMPLATES = (
    ("Objects: Where is object X?", "where is the {obj}?"),
    ("Objects: What did I put in X?", "what did I put in the {obj}?"),
    ("Objects: How many X's? (quantity question)", "how many {obj}s did I {verb}?"),
    ("Objects: In what location did I see object X ?", "in what location did I see the {obj}?"),
    ("Objects: What X did I Y?", "what {obj} did I {verb}?"),
    ("Place: Where did I put X?", "where did I put the {obj}?"),
    ("People: Who did I talk to in location X?", "who did I talk to in the {place}?"),
)


def make_nlq_standin(root, dim=DIM, seed=0, clips_per_split=None):
    """Write the NLQ stand-in under ``root`` (``clips_per_split``: {split: clips}, default
    NLQ_CLIPS). Returns the summary written to ego4d_nlq_standin.json."""
    counts = dict(NLQ_CLIPS, **(clips_per_split or {}))
    for split, count in counts.items():
        if split not in NLQ_CLIPS or isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise TanError(f"NLQ stand-in: {split!r} {count!r}; expected a positive number of clips for each of "
                           f"{', '.join(NLQ_CLIPS)}")
    rng = np.random.default_rng(seed)
    entries = builtin_entries()
    files, videos, sentences = {}, {}, []
    for split, count in counts.items():
        records = _split_videos(rng, split, count, videos)
        sentences += [q["query"] for v in records for c in v["clips"] for a in c["annotations"]
                      for q in a["language_queries"] if "query" in q]
        files[split] = os.path.join(root, entries[f"ego4d_nlq_{split}"]["annotations"])
        atomic_write_text(files[split], json.dumps({"version": "v1", "description": "tan's generated stand-in",
                                                    "videos": records}))
    counter, signal_words = _signal_words(sentences)
    patterns = {w: _pattern(w, dim) for w in signal_words}
    feature_rng = np.random.default_rng([seed, 1])
    os.makedirs(os.path.join(root, VIDEO_FOLDER), exist_ok=True)
    for uid in sorted(videos):
        rows = int(videos[uid]["duration"] * SLOWFAST_RATE) + 1
        info = dict(videos[uid], duration=rows / SLOWFAST_RATE)  # row k spans [k, k + 1) / rate seconds
        feats = _planted_features(info, rows, dim, feature_rng, patterns)
        atomic_torch_save(torch.from_numpy(feats), os.path.join(root, VIDEO_FOLDER, f"{uid}.pt"))
    clips = cut_nlq_clips(list(files.values()), os.path.join(root, VIDEO_FOLDER),
                          os.path.join(root, entries["ego4d_nlq_train"]["features"]))
    lines = [w + " " + " ".join(f"{x:.4f}" for x in _word_vector(w)) for w in sorted(counter)]
    atomic_write_text(os.path.join(root, WORD_VECTORS), "\n".join(lines) + "\n")
    summary = {"benchmark": "ego4d_nlq", "videos": len(videos), "clips": clips["clips"], "queries": len(sentences),
               "clips_per_split": counts, "dim": dim, "rows_per_second": SLOWFAST_RATE,
               "signal_words": len(signal_words), "seed": seed}
    atomic_write_text(os.path.join(root, "ego4d_nlq_standin.json"), json.dumps(summary, indent=2))
    get_logger("standin").info("Ego4D NLQ stand-in: %d videos, %d clips, %d queries, in %s", len(videos),
                               clips["clips"], len(sentences), root)
    return summary


def _split_videos(rng, split, count, videos):
    """The release's records of ``count`` clips of ``split``, in videos of one to three clips; each
    video's duration and queries (video seconds) are added to ``videos`` for its features."""
    records, made = [], 0
    while made < count:
        clips_here = min(int(rng.integers(1, 4)), count - made)
        uid = f"{split}-video-{len(records):05d}"
        position, clips = float(rng.uniform(0, 300)), []
        moments = []
        for _ in range(clips_here):
            start = round(position, 3)
            clips.append(_clip(rng, f"{split}-clip-{made:05d}", start, moments, uid))
            position = start + CLIP_SECONDS + float(rng.uniform(0, 120))
            made += 1
        videos[uid] = {"duration": position, "moments": moments}
        records.append({"video_uid": uid, "split": split, "clips": clips})
    return records


def _clip(rng, clip_uid, video_start, moments, video_uid):
    queries = []
    for _ in range(QUERIES_PER_CLIP):
        template, form = _TEMPLATES[int(rng.integers(len(_TEMPLATES)))]
        words = {"obj": _OBJECTS[int(rng.integers(len(_OBJECTS)))], "verb": _VERBS[int(rng.integers(len(_VERBS)))],
                 "place": _PLACES[int(rng.integers(len(_PLACES)))]}
        sentence = form.format(**words)
        length = 0.0 if rng.random() < EMPTY_WINDOWS else float(np.clip(rng.lognormal(np.log(6.0), 0.8), 1, 60))
        start = round(float(rng.uniform(0, CLIP_SECONDS - length)), 3)
        end = round(start + length, 3)
        record = {"clip_start_sec": start, "clip_end_sec": end, "video_start_sec": round(video_start + start, 3),
                  "video_end_sec": round(video_start + end, 3), "template": template, "slot_x": words["obj"],
                  "verb_x": words["verb"]}
        if rng.random() >= NO_SENTENCE:
            record["query"] = sentence
            moments.append(Query(video_uid, 1.0, 0.0, 1.0, sentence,
                                 moments=((video_start + start, video_start + max(end, start + 1e-3)),)))
        queries.append(record)
    cut = sorted(rng.choice(np.arange(1, QUERIES_PER_CLIP), size=2, replace=False).tolist())
    groups = [queries[:cut[0]], queries[cut[0]:cut[1]], queries[cut[1]:]]
    return {"clip_uid": clip_uid, "video_start_sec": video_start, "video_end_sec": round(video_start + CLIP_SECONDS, 3),
            "clip_start_sec": 0.0, "clip_end_sec": CLIP_SECONDS,
            "annotations": [{"annotation_uid": f"{clip_uid}-annotation-{k}", "language_queries": group}
                            for k, group in enumerate(groups)]}
