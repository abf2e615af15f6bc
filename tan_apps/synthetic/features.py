"""The built-in synthetic dataset, generated from a fixed seed on first use.

It is written in the on-disk formats of the real benchmarks (annotation JSON
in seconds, one HDF5 dataset of clip features per video, GloVe-format word
vectors), so the first run takes the same code path as real data.

What makes it learnable but not trivial: every sentence names a verb and an
object ("the person washes the cup"); the clips of its moment carry the sum
of a verb pattern and an object pattern on top of noise. Each video is
tiled by two to four such moments of different actions with short stretches
of background between them, and every moment is queried: "where is some
action" does not help, and the other moments often share the verb or the
object with the queried one, so a model must read both words to pick the
right one. Moment lengths (8% to 90% of the video) and positions vary widely,
so a fixed guess does poorly. A few filler words have no vector (unknown
words).
"""
import json
import os

import h5py
import numpy as np

from tan.utils.io import atomic_write_text, replaced_when_done
from tan.utils.logger import get_logger
from tan.data.generated import register_generator
from tan.data.tokens import tokenize

VERSION = 2
SEED = 20261129
FEATURE_DIM = 128
WORD_DIM = 300
CLIP_SECONDS = 0.5
SPLITS = {"train": 600, "val": 100, "test": 200}  # videos per split
SHARE_VERB = 0.25  # chance that another moment of the video has the queried moment's verb
SHARE_OBJECT = 0.25  # ... its object
PATTERN_NORM = 8.0  # norm of each verb / object pattern; the clip noise has norm ~sqrt(FEATURE_DIM) = 11.3
TILE_GAP = 0.1  # background left at each end of a moment's tile, as a fraction of the tile

VERBS = ["opens", "closes", "washes", "cuts", "holds", "throws", "pours", "stirs", "folds", "cleans",
         "lifts", "drops"]
OBJECTS = ["door", "box", "cup", "knife", "towel", "bottle", "bowl", "shirt", "book", "phone", "pan", "bag"]
SUBJECTS = ["the person", "a man", "a woman", "someone", "the cook"]
# Words of the templates; those in NO_VECTOR are left out of the vector file.
TEMPLATES = [
    "{subj} {verb} the {obj}.",
    "{subj} {verb} a {obj}.",
    "then {subj} {verb} the {obj} again.",
    "{subj} slowly {verb} the {obj}",
    "{subj} carefully {verb} the {obj} on the table.",
    "after that, {subj} {verb} the {obj}.",
]
NO_VECTOR = {"carefully", "cook"}


def _tokens_of_templates():
    words = set(VERBS) | set(OBJECTS)
    for template in TEMPLATES:
        for subj in SUBJECTS:
            words.update(tokenize(template.format(subj=subj, verb="", obj="")))
    return sorted(words - NO_VECTOR)


def _place_moments(rng, num_clips, count):
    """``count`` moments tiling the video: consecutive tiles of at least 8% of
    it, each shrunk at both ends by up to TILE_GAP of its length (background)."""
    while True:
        cuts = np.sort(rng.uniform(0, num_clips, size=count - 1))
        bounds = np.concatenate([[0.0], cuts, [float(num_clips)]])
        if np.diff(bounds).min() >= 0.08 * num_clips:
            break
    gaps = rng.uniform(0, TILE_GAP, size=(count, 2)) * np.diff(bounds)[:, None]
    return [(float(a + g0), float(b - g1)) for a, b, (g0, g1) in zip(bounds[:-1], bounds[1:], gaps)]


def _pick_actions(rng, count):
    """``count`` different (verb, object) pairs; later ones often share a word with the first."""
    first = (int(rng.integers(len(VERBS))), int(rng.integers(len(OBJECTS))))
    actions = [first]
    while len(actions) < count:
        r = rng.random()
        verb = first[0] if r < SHARE_VERB else int(rng.integers(len(VERBS)))
        obj = first[1] if SHARE_VERB <= r < SHARE_VERB + SHARE_OBJECT else int(rng.integers(len(OBJECTS)))
        if (verb, obj) not in actions:
            actions.append((verb, obj))
    order = rng.permutation(count)
    return [actions[i] for i in order]


def action_patterns(rng):
    """The feature patterns [len(VERBS), D] and [len(OBJECTS), D] of the verbs and objects: the
    generator's first draws (``rng`` fresh from the dataset's seed gives the dataset's own)."""
    verb_patterns = rng.normal(size=(len(VERBS), FEATURE_DIM))
    obj_patterns = rng.normal(size=(len(OBJECTS), FEATURE_DIM))
    verb_patterns *= PATTERN_NORM / np.linalg.norm(verb_patterns, axis=1, keepdims=True)
    obj_patterns *= PATTERN_NORM / np.linalg.norm(obj_patterns, axis=1, keepdims=True)
    return verb_patterns, obj_patterns


def clip_features(rng, num_clips, moments, actions, patterns):
    """[num_clips, D] float64 features of a video: noise with a per-video offset, and each moment's
    (start, end clips) verb and object patterns added to the clips whose centres it holds."""
    verb_patterns, obj_patterns = patterns
    feats = rng.normal(size=(num_clips, FEATURE_DIM)) + rng.normal(scale=0.5, size=FEATURE_DIM)
    centres = np.arange(num_clips) + 0.5
    for (start, end), (verb, obj) in zip(moments, actions):
        inside = (centres >= start) & (centres < end)
        feats[inside] += verb_patterns[verb] + obj_patterns[obj]
    return feats


def generate(root, seed=SEED):
    """Write synthetic/{annotations/{split}.json, features/..., word_vectors.txt} under ``root``."""
    rng = np.random.default_rng(seed)
    folder = os.path.join(root, "synthetic")
    verb_patterns, obj_patterns = action_patterns(rng)

    os.makedirs(os.path.join(folder, "annotations"), exist_ok=True)
    os.makedirs(os.path.join(folder, "features"), exist_ok=True)
    feature_path = os.path.join(folder, "features", "synthetic_features.hdf5")
    with replaced_when_done(feature_path) as tmp_features, h5py.File(tmp_features, "w") as h5:
        for split, num_videos in SPLITS.items():
            annotations = {}
            for v in range(num_videos):
                video = f"syn_{split}_{v:04d}"
                num_clips = int(rng.integers(48, 161))
                count = int(rng.integers(2, 5))
                moments = _place_moments(rng, num_clips, count)
                actions = _pick_actions(rng, len(moments))
                feats = clip_features(rng, num_clips, moments, actions, (verb_patterns, obj_patterns))
                h5.create_dataset(video, data=feats.astype(np.float32))
                sentences = [
                    TEMPLATES[int(rng.integers(len(TEMPLATES)))].format(
                        subj=SUBJECTS[int(rng.integers(len(SUBJECTS)))], verb=VERBS[verb], obj=OBJECTS[obj])
                    for verb, obj in actions
                ]
                annotations[video] = {
                    "duration": round(num_clips * CLIP_SECONDS, 3),
                    "timestamps": [[round(s * CLIP_SECONDS, 3), round(e * CLIP_SECONDS, 3)] for s, e in moments],
                    "sentences": sentences,
                }
            atomic_write_text(os.path.join(folder, "annotations", f"{split}.json"), json.dumps(annotations))

    lines = []
    for word in _tokens_of_templates():
        vector = rng.normal(scale=0.4, size=WORD_DIM)
        lines.append(word + " " + " ".join(f"{x:.5f}" for x in vector))
    atomic_write_text(os.path.join(folder, "word_vectors.txt"), "\n".join(lines) + "\n")
    mark_complete(folder, {"version": VERSION, "seed": seed})


def mark_complete(folder, stamp):
    """Write ``folder``/READY holding ``stamp`` (its generator's version and seed): written last, its
    presence means every other file of the folder is complete."""
    atomic_write_text(os.path.join(folder, "READY"), json.dumps(stamp))


def is_complete(folder, stamp):
    """Whether ``folder`` holds a complete copy written with ``stamp`` (:func:`mark_complete`)."""
    try:
        with open(os.path.join(folder, "READY")) as f:
            return json.load(f) == stamp
    except (OSError, ValueError):
        return False


@register_generator("synthetic")
def ensure_synthetic(root):
    """Generate the synthetic dataset under ``root`` unless a complete copy is there."""
    if is_complete(os.path.join(root, "synthetic"), {"version": VERSION, "seed": SEED}):
        return
    get_logger("data").info("generating the built-in synthetic dataset under %s", os.path.join(root, "synthetic"))
    generate(root)
