"""Long videos made of the synthetic dataset's moments (tan_apps/synthetic/features.py):
an hour or more of clips at its rate (CLIP_SECONDS), moments of other actions one
after another as in its videos, and one short moment that a sentence describes. A model trained
on the dataset's 24-80 s videos is asked to find it (docs/long_videos.md).

The patterns are the dataset's own (its generator's first draws), so a model
trained on the dataset knows every action here."""
import json
import os

import h5py
import numpy as np

from tan.data.generated import register_generator
from tan.utils.io import atomic_write_text, replaced_when_done
from tan.utils.logger import get_logger

from .features import (CLIP_SECONDS, OBJECTS, SEED, SUBJECTS, TILE_GAP, VERBS, action_patterns, clip_features,
                       ensure_synthetic, is_complete, mark_complete)

TILE_SECONDS = (4.0, 25.0)  # the other moments' lengths: those of the dataset's (8% of its videos or more)


def long_video(seconds, moment_seconds, seed):
    """(features [T, D] float32 at CLIP_SECONDS per row, duration s, the sentence, its moment (start, end) s).

    As in the dataset's videos, moments follow one another with a little background between
    (TILE_GAP); the asked action (a verb and an object) is one of them, ``moment_seconds`` long at a
    random place, and the others, TILE_SECONDS long, are actions that share neither its verb nor its
    object, so that the sentence describes one moment of the video."""
    rng = np.random.default_rng(seed)
    patterns = action_patterns(np.random.default_rng(SEED))
    num_clips = int(round(seconds / CLIP_SECONDS))
    length = int(round(moment_seconds / CLIP_SECONDS))
    if not 1 <= length < num_clips:
        raise ValueError(f"a moment of {moment_seconds} s does not fit in a video of {seconds} s")
    verb, obj = int(rng.integers(len(VERBS))), int(rng.integers(len(OBJECTS)))
    start = int(rng.integers(0, num_clips - length))
    others = [(v, o) for v in range(len(VERBS)) for o in range(len(OBJECTS)) if v != verb and o != obj]
    tiles = _tiles(rng, 0, start) + [(start, start + length)] + _tiles(rng, start + length, num_clips)
    moments, actions = [], []
    for a, b in tiles:
        asked = (a, b) == (start, start + length)
        gap0, gap1 = (0.0, 0.0) if asked else rng.uniform(0, TILE_GAP, size=2) * (b - a)
        moments.append((a + gap0, b - gap1))
        actions.append((verb, obj) if asked else others[int(rng.integers(len(others)))])
    feats = clip_features(rng, num_clips, moments, actions, patterns).astype(np.float32)
    sentence = f"{SUBJECTS[int(rng.integers(len(SUBJECTS)))]} {VERBS[verb]} the {OBJECTS[obj]}."
    return feats, num_clips * CLIP_SECONDS, sentence, (start * CLIP_SECONDS, (start + length) * CLIP_SECONDS)


def _tiles(rng, first, end):
    """Consecutive (start, end) clip ranges from ``first`` to ``end``, each TILE_SECONDS long (the
    last one takes what is left, or joins the one before when too short)."""
    low, high = (int(t / CLIP_SECONDS) for t in TILE_SECONDS)
    tiles, position = [], first
    while position < end:
        b = min(position + int(rng.integers(low, high + 1)), end)
        if end - b < low:
            b = end
        tiles.append((position, b))
        position = b
    return tiles


def write_long_dataset(folder, videos, seconds, moment_seconds=10.0, seed=0):
    """A dataset of long videos under ``folder``, in the synthetic dataset's formats:
    annotations/{split}.json (seconds) and features/{split}.hdf5, one query per video.

    ``videos``: {split: number of videos}; ``seconds``: (shortest, longest) duration, drawn per
    video (or {split: (shortest, longest)}); each video is :func:`long_video` of its own seed.
    Returns {split: (annotation path, feature path)}."""
    rng = np.random.default_rng(seed)
    for part in ("annotations", "features"):
        os.makedirs(os.path.join(folder, part), exist_ok=True)
    written = {}
    for split, count in videos.items():
        low, high = seconds[split] if isinstance(seconds, dict) else seconds
        annotations = os.path.join(folder, "annotations", f"{split}.json")
        features = os.path.join(folder, "features", f"{split}.hdf5")
        entries = {}
        with replaced_when_done(features) as tmp, h5py.File(tmp, "w") as h5:
            for number in range(count):
                length = float(rng.uniform(low, high)) if high > low else float(low)
                feats, duration, sentence, moment = long_video(length, moment_seconds, int(rng.integers(2 ** 31)))
                name = f"long_{split}_{number:04d}"
                h5.create_dataset(name, data=feats)
                entries[name] = {"duration": round(duration, 3), "timestamps": [[round(t, 3) for t in moment]],
                                 "sentences": [sentence]}
        atomic_write_text(annotations, json.dumps(entries))
        written[split] = (annotations, features)
    return written


# The built-in "synthetic_long" dataset (DATASETS.ROOT/synthetic_long, written on first use): training
# videos of 2 to 5 minutes, validation and test videos of 5 minutes, and an hour-long test split; one
# 10-second moment asked per video. The sentences' words are the synthetic dataset's (its word vectors).
LONG_SPLITS = {"train": (600, (120.0, 300.0)), "val": (50, (300.0, 300.0)), "test": (200, (300.0, 300.0)),
               "test_hour": (20, (3600.0, 3600.0))}
LONG_VERSION = 1
LONG_SEED = 20261204


@register_generator("synthetic_long")
def ensure_synthetic_long(root):
    """Generate the long synthetic dataset under ``root`` (and the synthetic dataset, whose word
    vectors it uses) unless a complete copy is there."""
    ensure_synthetic(root)
    folder, stamp = os.path.join(root, "synthetic_long"), {"version": LONG_VERSION, "seed": LONG_SEED}
    if is_complete(folder, stamp):
        return
    get_logger("data").info("generating the long synthetic dataset under %s", folder)
    write_long_dataset(folder, {split: count for split, (count, _) in LONG_SPLITS.items()},
                       {split: span for split, (_, span) in LONG_SPLITS.items()}, seed=LONG_SEED)
    mark_complete(folder, stamp)
