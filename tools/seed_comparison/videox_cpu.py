"""microsoft/VideoX's MS-2D-TAN code, unchanged, on the CPU with a seed: its
moment_localization/run.py (train mode: every epoch trained, then tested), on the generated
dataset laid out as its repository's data folder holds TACoS (ROOT/videox/TACoS: the split files,
the C3D features keyed by video name without its extension, as it looks them up, and GloVe in
.vector_cache), which tan's ms2dtan_tacos_c3d datasets read too.

Its run.py seeds torch from --seed; Python's random, which draws its training windows, it leaves
unseeded: here it is seeded too (and numpy), so that a seed gives one run.

Stubbed at run time only: torchtext (GloVe read from the dataset's text file in the 400000-row
layout of glove.6B), NLTK (its word_tokenize splits on white space: the generated sentences have
no punctuation; no download), torchvision (imported for video files it does not read here) and
"cuda" (tensors stay on the CPU).

  python tools/seed_comparison/videox_cpu.py --reference PATH --data ROOT --seed 1 --out RUN
"""
import argparse
import os
import random
import runpy
import sys
import types

import h5py
import numpy as np

from stubs import install_glove, keep_on_cpu

HERE = os.path.dirname(os.path.abspath(__file__))
FINISHED = "finished"  # written in --out once its run.py has returned


def lay_out(root):
    """ROOT/videox/TACoS: the annotation files and GloVe linked, the features copied under names
    without '.avi' (its TACoS reader strips the extension); kept once written. Returns ROOT/videox,
    its --dataDir and tan's DATASETS.ROOT."""
    folder = os.path.join(root, "videox", "TACoS")
    features = os.path.join(folder, "tacos_c3d_fc6_nonoverlap.hdf5")  # its TACoS C3D file
    if os.path.isfile(features):
        return os.path.dirname(folder)
    os.makedirs(os.path.join(folder, ".vector_cache"), exist_ok=True)
    links = {f"{split}.json": os.path.join("tacos", "annotations", f"{split}.json")
             for split in ("train", "val", "test")}
    links[os.path.join(".vector_cache", "glove.6B.300d.txt")] = os.path.join("glove", "glove.840B.300d.txt")
    for name, target in links.items():
        if not os.path.lexists(os.path.join(folder, name)):
            os.symlink(os.path.join(os.path.abspath(root), target), os.path.join(folder, name))
    with h5py.File(os.path.join(root, "tacos", "features", "tall_c3d_features.hdf5"), "r") as src, \
            h5py.File(features + ".tmp", "w") as dst:
        for name in src:
            dst.create_dataset(os.path.splitext(name)[0], data=src[name][:])
    os.replace(features + ".tmp", features)
    return os.path.dirname(folder)


def install_stubs(glove):
    install_glove(glove, ("glove.6B.300d",))
    keep_on_cpu()
    nltk = types.ModuleType("nltk")
    nltk.download = lambda *a, **k: True
    nltk.tokenize = types.ModuleType("nltk.tokenize")
    nltk.tokenize.word_tokenize = str.split
    sys.modules.update({"nltk": nltk, "nltk.tokenize": nltk.tokenize})
    torchvision = types.ModuleType("torchvision")
    torchvision.io = types.SimpleNamespace()
    sys.modules["torchvision"] = torchvision


def main():
    parser = argparse.ArgumentParser(description="microsoft/VideoX's MS-2D-TAN training on the CPU, with a seed")
    parser.add_argument("--reference", required=True, help="a checkout of microsoft/VideoX")
    parser.add_argument("--data", required=True, help="the dataset's root (make_dataset.py --root)")
    parser.add_argument("--seed", type=int, required=True, help="torch (its --seed), numpy and random")
    parser.add_argument("--config-file", default=os.path.join(HERE, "ms2dtan_reference.yaml"))
    parser.add_argument("--out", required=True, help="its log and checkpoints go here (log/, checkpoints/)")
    args = parser.parse_args()
    data, out = os.path.abspath(args.data), os.path.abspath(args.out)
    run = os.path.join(os.path.abspath(args.reference), "MS-2D-TAN", "moment_localization", "run.py")
    if not os.path.isfile(run):
        parser.error(f"--reference {args.reference}: expected a checkout of microsoft/VideoX, with {run}")
    layout = lay_out(data)
    install_stubs(os.path.join(data, "glove", "glove.840B.300d.txt"))
    random.seed(args.seed)
    np.random.seed(args.seed)
    os.makedirs(out, exist_ok=True)
    os.chdir(out)
    sys.path.insert(0, os.path.dirname(run))
    sys.argv = [run, "--cfg", os.path.abspath(args.config_file), "--seed", str(args.seed), "--dataDir", layout,
                "--modelDir", os.path.join(out, "checkpoints"), "--logDir", os.path.join(out, "log"), "--workers", "0",
                "--tag", "train"]
    runpy.run_path(run, run_name="__main__")
    # it prints a test table every epoch: this file says that the last one is the last epoch's
    open(os.path.join(out, FINISHED), "w").close()


if __name__ == "__main__":
    main()
