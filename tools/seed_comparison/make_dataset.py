"""A small generated dataset in TACoS's release layout (annotations in frames, one HDF5 of clip
features per video, a GloVe text file), learnable only by reading both the verb and the object:
each video is tiled by 2-4 moments of different (verb, object) actions, the clips of a moment carry
the sum of the verb's and the object's patterns over noise, and each moment is asked about in
several phrasings. No punctuation, every word has a vector: both codes read the same words."""
import argparse
import json
import os

import h5py
import numpy as np

from tan_apps.synthetic.features import OBJECTS, SUBJECTS, VERBS  # the built-in dataset's words

DIM, WORD_DIM, FPS, FRAMES_PER_ROW = 64, 50, 29.4, 16
VIDEOS = {"train": 64, "val": 8, "test": 24}
PHRASINGS = 10  # sentences per moment
PATTERN_NORM = 8.0  # of each verb and object pattern; the clips' noise has norm about sqrt(DIM) = 8
TEMPLATES = ["{s} {v} the {o}", "{s} {v} a {o}", "then {s} {v} the {o} again", "{s} slowly {v} the {o}",
             "{s} carefully {v} the {o} on the table", "after that {s} {v} the {o}"]


def build_parser():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="folder to write tacos/ and glove/ into")
    parser.add_argument("--seed", type=int, default=7, help="the generator's seed (default 7: the documented data)")
    parser.add_argument("--train-videos", type=int, default=VIDEOS["train"],
                        help="training videos (default %(default)s)")
    parser.add_argument("--test-videos", type=int, default=VIDEOS["test"], help="test videos (default %(default)s)")
    parser.add_argument("--test-phrasings", type=int, default=PHRASINGS,
                        help="sentences asked of each test moment (default %(default)s). A model reads a moment's "
                             "phrasings alike, so the test figure moves in steps of moments, not queries: one "
                             "phrasing over many videos makes it a figure over that many independent moments")
    parser.add_argument("--pattern-norm", type=float, default=PATTERN_NORM,
                        help="norm of each verb's and object's pattern against the clips' noise of norm about 8: "
                             "larger is easier (default %(default)s)")
    return parser


def write(root, seed, train_videos=VIDEOS["train"], pattern_norm=PATTERN_NORM, test_videos=VIDEOS["test"],
          test_phrasings=PHRASINGS):
    """Write ROOT/tacos/{annotations,features} and ROOT/glove/glove.840B.300d.txt (50-d, the name its loader reads)."""
    rng = np.random.default_rng(seed)
    verb_patterns = rng.normal(size=(len(VERBS), DIM))
    verb_patterns *= pattern_norm / np.linalg.norm(verb_patterns, axis=1, keepdims=True)
    object_patterns = rng.normal(size=(len(OBJECTS), DIM))
    object_patterns *= pattern_norm / np.linalg.norm(object_patterns, axis=1, keepdims=True)
    for folder in ("tacos/annotations", "tacos/features", "glove"):
        os.makedirs(os.path.join(root, folder), exist_ok=True)
    with h5py.File(f"{root}/tacos/features/tall_c3d_features.hdf5", "w") as h5:
        for split, n in {**VIDEOS, "train": train_videos, "test": test_videos}.items():
            phrasings = test_phrasings if split == "test" else PHRASINGS
            annos = {}
            for i in range(n):
                vid = f"s{split}-d{i:02d}.avi"
                rows = int(rng.integers(64, 200))
                count = int(rng.integers(2, 5))
                cuts = np.sort(rng.choice(np.arange(1, count * 8), count - 1, replace=False)) / (count * 8)
                bounds = np.concatenate([[0], cuts, [1]]) * rows
                feats = rng.normal(size=(rows, DIM)) + rng.normal(scale=0.5, size=DIM)
                stamps, sentences = [], []
                for k in range(count):
                    tile = bounds[k + 1] - bounds[k]
                    s = bounds[k] + tile * rng.uniform(0.0, 0.2)
                    e = bounds[k + 1] - tile * rng.uniform(0.0, 0.2)
                    s, e = int(np.floor(s)), max(int(np.ceil(e)), int(np.floor(s)) + 1)
                    v, o = int(rng.integers(len(VERBS))), int(rng.integers(len(OBJECTS)))
                    feats[s:e] += verb_patterns[v] + object_patterns[o]
                    for _ in range(phrasings):
                        t = TEMPLATES[int(rng.integers(len(TEMPLATES)))]
                        subject = SUBJECTS[int(rng.integers(len(SUBJECTS)))]
                        sentences.append(t.format(s=subject, v=VERBS[v], o=OBJECTS[o]))
                        stamps.append([s * FRAMES_PER_ROW, e * FRAMES_PER_ROW])
                h5.create_dataset(vid, data=feats.astype(np.float32))
                annos[vid] = {"num_frames": rows * FRAMES_PER_ROW, "fps": FPS, "timestamps": stamps,
                              "sentences": sentences}
            json.dump(annos, open(f"{root}/tacos/annotations/{split}.json", "w"))
            print(split, n, sum(len(a["sentences"]) for a in annos.values()))
    words = sorted({w for t in TEMPLATES for w in t.replace("{s}", "").replace("{v}", "").replace("{o}", "").split()}
                   | {w for s in SUBJECTS for w in s.split()} | set(VERBS) | set(OBJECTS))
    with open(f"{root}/glove/glove.840B.300d.txt", "w") as f:
        for w in words:
            f.write(w + " " + " ".join(f"{x:.5f}" for x in rng.normal(scale=0.4, size=WORD_DIM)) + "\n")
    print(len(words), "words")


def main(argv=None):
    args = build_parser().parse_args(argv)
    write(args.root, args.seed, args.train_videos, args.pattern_norm, args.test_videos, args.test_phrasings)


if __name__ == "__main__":
    main()
