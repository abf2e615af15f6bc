"""Long videos made of the synthetic dataset's moments (tan_apps/synthetic/features.py):
an hour or more of clips at its rate (CLIP_SECONDS), moments of other actions one
after another as in its videos, and one short moment that a sentence describes. A model trained
on the dataset's 24-80 s videos is asked to find it (docs/long_videos.md).

The patterns are the dataset's own (its generator's first draws), so a model
trained on the dataset knows every action here."""
import numpy as np

from .features import CLIP_SECONDS, OBJECTS, SEED, SUBJECTS, TILE_GAP, VERBS, action_patterns, clip_features

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
