#!/usr/bin/env python
"""Write a full-scale stand-in of a benchmark: its real annotation files plus
generated features (a planted signal) and word vectors, in the real layout.

Examples:
  python tools/make_standin.py --benchmark activitynet --root datasets_standin
  python tools/make_standin.py --benchmark tacos --dim 256 --root datasets_standin_small
  python tools/train_net.py --config-file configs/2dtan_64x64_pool_k9l4_activitynet.yaml DATASETS.ROOT datasets_standin
"""
import argparse
import os
import time

import checkout_path  # noqa: F401  (this checkout's tan first on sys.path)
from tan.cli.exits import run_cli
from tan.data.standin import BENCHMARKS, make_standin, write_charades_text_form
from tan.utils.logger import setup_logger

SHARED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data", "annotations")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmark", required=True, choices=sorted(BENCHMARKS) + ["all"])
    parser.add_argument("--annotations", default=os.path.normpath(SHARED),
                        help="folder holding the real annotation files (default: ../shared/data/annotations)")
    parser.add_argument("--root", required=True, help="DATASETS.ROOT to write into")
    parser.add_argument("--dim", type=int, default=None,
                        help="feature dimension (default: the real one, 4096 / 500 / 4096); "
                             "set MODEL.TAN.FEATPOOL.INPUT_SIZE (MODEL.MMN.FEATPOOL.INPUT_SIZE for MMN) to match")
    parser.add_argument("--clips-per-second", type=float, default=None, help="feature rate (default per benchmark)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    setup_logger(None)
    for benchmark in sorted(BENCHMARKS) if args.benchmark == "all" else [args.benchmark]:
        start = time.perf_counter()
        make_standin(benchmark, args.annotations, args.root, args.dim, args.seed, args.clips_per_second)
        if benchmark == "charades":
            write_charades_text_form(args.root)
        print(f"{benchmark}: written under {args.root} in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    run_cli(main)
