#!/usr/bin/env python
"""Write a full-scale stand-in of a benchmark: its real annotation files plus
generated features (a planted signal) and word vectors, in the real layout.

--layout reference (the default) writes 2D-TAN's files: the annotation JSON
files, one HDF5 feature file and a GloVe text file. --layout lighthouse
writes the files of the built-in *_lighthouse_* datasets: JSON-lines
annotations, CLIP and SlowFast feature folders (float16 .npz per video) and
CLIP-like token features per query (docs/data.md §9); train those with
configs/lighthouse/*.yaml. --benchmark qvhighlight (lighthouse layout only)
generates QVHighlights as a whole, its queries too (no annotation file of it
is needed): one to three windows per query, the clips' saliency scores, and a
test split without labels, as released.

Examples:
  python tools/make_standin.py --benchmark activitynet --root datasets_standin
  python tools/make_standin.py --benchmark tacos --dim 256 --root datasets_standin_small
  python tools/train_net.py --config-file configs/2dtan_64x64_pool_k9l4_activitynet.yaml DATASETS.ROOT datasets_standin
  python tools/make_standin.py --benchmark charades --layout lighthouse --root datasets_lh \\
      --dim-clip 64 --dim-slowfast 32 --dim-text 64
  python tools/train_net.py --config-file configs/lighthouse/2dtan_charades.yaml DATASETS.ROOT datasets_lh \\
      MODEL.TAN.FEATPOOL.INPUT_SIZE 96 INPUT.PRE_QUERY_SIZE 64
  python tools/make_standin.py --benchmark qvhighlight --layout lighthouse --root datasets_lh --videos 500
  python tools/make_standin.py --benchmark ego4d_nlq --root datasets_nlq --dim 256 --videos 100
  python tools/make_standin.py --benchmark mad --root datasets_mad --dim 32 --videos 4 \
      --queries-per-movie train=100,val=5,test=10 --minutes 60 65

--benchmark ego4d_nlq (reference layout) generates Ego4D NLQ as a whole, its
queries too: nlq_{train,val}.json in the release's layout, per-video SlowFast-rate
features (.pt), the clips cut from them and word vectors (tan_apps/nlq_standin.py);
--videos is then the number of clips per split (default about the release's).
--benchmark mad (reference layout) generates MAD as a whole: MAD_{train,val,test}.json
in the release's layout, movies of one to two and a half hours, CLIP-rate features
(5 rows a second) in one HDF5 file and word vectors (tan_apps/mad_standin.py);
--videos is the number of movies per split (default a tenth of the release's),
--queries-per-movie the queries of each (default the release's, 574 to 1000),
--minutes the range of a movie's length (default 60 to 150).
"""
import argparse
import math
import os
import time

import checkout_path  # noqa: F401  (this checkout's tan first on sys.path)
from tan_apps.cli.exit_codes import run_cli
from tan_apps.standin import (BENCHMARKS, LIGHTHOUSE, LIGHTHOUSE_DIMS, QVHIGHLIGHTS_QUERIES, make_lighthouse_standin,
                         make_qvhighlights_standin, make_standin, write_charades_text_form)
from tan.utils.logger import setup_logger
from tan_apps.mad_standin import DIM as MAD_DIM, MAD_MOVIES, MINUTES as MAD_MINUTES, make_mad_standin
from tan_apps.nlq_standin import DIM as NLQ_DIM, NLQ_CLIPS, make_nlq_standin

# The real annotation files this checkout holds (data/annotations/README.md says where each comes from).
ANNOTATIONS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "annotations")
LAYOUTS = ("reference", "lighthouse")
QVHIGHLIGHT = "qvhighlight"
NLQ = "ego4d_nlq"
MAD = "mad"
GENERATED = (NLQ, MAD)  # generated as a whole, in the reference layout only


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmark", required=True, choices=sorted(BENCHMARKS) + [QVHIGHLIGHT, NLQ, MAD, "all"],
                        help=f"{QVHIGHLIGHT}: generated, lighthouse layout only; {NLQ} and {MAD}: generated, "
                             f"reference layout only; all: every benchmark of the layout taken from real "
                             f"annotation files")
    parser.add_argument("--layout", choices=LAYOUTS, default="reference",
                        help="reference: 2D-TAN's files (default); lighthouse: the *_lighthouse_* datasets' files")
    parser.add_argument("--annotations", default=ANNOTATIONS,
                        help="folder holding the real annotation files, as .json or .json.gz (default: this "
                             "checkout's data/annotations)")
    parser.add_argument("--root", required=True, help="DATASETS.ROOT to write into")
    parser.add_argument("--dim", type=int, default=None,
                        help="reference layout: feature dimension (default: the real one, 4096 / 500 / 4096); "
                             "set MODEL.TAN.FEATPOOL.INPUT_SIZE (MODEL.MMN.FEATPOOL.INPUT_SIZE for MMN) to match")
    parser.add_argument("--clips-per-second", type=float, default=None,
                        help="reference layout: feature rate (default per benchmark)")
    for name in LIGHTHOUSE_DIMS:
        parser.add_argument(f"--dim-{name}", type=int, default=None,
                            help=f"lighthouse layout: {name} feature size (default {LIGHTHOUSE_DIMS[name]}, the "
                                 f"real one)" + ("; set INPUT.PRE_QUERY_SIZE to match" if name == "text" else ""))
    parser.add_argument("--videos", type=int, default=None,
                        help="keep only the first N videos (by id) of each split, with their queries "
                             f"(default: all), for a quick stand-in; {QVHIGHLIGHT}: N videos (one query each) per "
                             f"split (default: the release's {', '.join(f'{s} {n}' for s, n in QVHIGHLIGHTS_QUERIES.items())}); "
                             f"{NLQ}: N clips (9 queries each) per split (default "
                             f"{', '.join(f'{s} {n}' for s, n in NLQ_CLIPS.items())}); {MAD}: N movies per split "
                             f"(default {', '.join(f'{s} {n}' for s, n in MAD_MOVIES.items())})")
    parser.add_argument("--queries-per-movie", type=_per_split, default=None, metavar="N or SPLIT=N,...",
                        help=f"{MAD} only: queries of each movie, for every split or per split (train=100,test=10; "
                             f"default the release's: 574 train, 641 val, 1000 test)")
    parser.add_argument("--minutes", type=float, nargs=2, default=None, metavar=("SHORTEST", "LONGEST"),
                        help=f"{MAD} only: the range of a movie's length in minutes (default "
                             f"{MAD_MINUTES[0]:g} to {MAD_MINUTES[1]:g})")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.seed < 0:  # numpy's generators take none below 0
        parser.error(f"--seed {args.seed}: expected a number of 0 or more")
    _check_layout_options(parser, args)
    return args


def _per_split(text):
    """--queries-per-movie: "N" (every split) or "split=N,..." -> {split: N} or N."""
    try:
        if "=" not in text:
            return int(text)
        counts = dict(part.split("=") for part in text.split(","))
        return {split.strip(): int(n) for split, n in counts.items()}
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected N or SPLIT=N,... (train=100,val=5,test=10)") from None


def _check_layout_options(parser, args):
    """Refuse an option of the other layout rather than ignore it."""
    lighthouse_dims = {name: getattr(args, f"dim_{name}") for name in LIGHTHOUSE_DIMS}
    if args.layout == "lighthouse" and (args.dim is not None or args.clips_per_second is not None):
        parser.error("--dim and --clips-per-second are for --layout reference; for lighthouse give "
                     "--dim-clip, --dim-slowfast and --dim-text (the rate is lighthouse's clip length)")
    if args.layout == "reference" and any(v is not None for v in lighthouse_dims.values()):
        parser.error("--dim-clip, --dim-slowfast and --dim-text are for --layout lighthouse; use --dim")
    if args.benchmark == QVHIGHLIGHT and args.layout != "lighthouse":
        parser.error(f"--benchmark {QVHIGHLIGHT} exists in the lighthouse layout only: add --layout lighthouse")
    if args.benchmark in GENERATED and args.layout != "reference":
        parser.error(f"--benchmark {args.benchmark} exists in the reference layout only")
    if args.benchmark == NLQ and args.clips_per_second is not None:
        parser.error(f"--clips-per-second: {NLQ}'s features are at SlowFast's rate, 30/16 rows a second")
    if args.benchmark == MAD and args.clips_per_second is not None:
        parser.error(f"--clips-per-second: {MAD}'s features are at its CLIP frames' rate, 5 rows a second")
    queries = args.queries_per_movie
    if queries is not None:
        given = queries.values() if isinstance(queries, dict) else [queries]
        if args.benchmark != MAD or any(n < 1 for n in given) or (isinstance(queries, dict)
                                                                 and not set(queries) <= set(MAD_MOVIES)):
            parser.error(f"--queries-per-movie: positive numbers, for every split or for some of "
                         f"{', '.join(MAD_MOVIES)}, with --benchmark {MAD} only")
    if args.minutes is not None and (args.benchmark != MAD or not 1 <= args.minutes[0] <= args.minutes[1] < math.inf):
        parser.error(f"--minutes SHORTEST LONGEST: 1 <= SHORTEST <= LONGEST, for --benchmark {MAD} only")
    if args.videos is not None and args.videos < 1:
        parser.error(f"--videos: expected a positive number of videos, got {args.videos}")
    args.lighthouse_dims = lighthouse_dims


def write(benchmark, args):
    if benchmark == MAD:
        movies = None if args.videos is None else {split: args.videos for split in MAD_MOVIES}
        queries = args.queries_per_movie
        if isinstance(queries, int):
            queries = {split: queries for split in MAD_MOVIES}
        make_mad_standin(args.root, args.dim or MAD_DIM, args.seed, movies, queries, args.minutes or MAD_MINUTES)
        return
    if benchmark == NLQ:
        sizes = None if args.videos is None else {split: args.videos for split in NLQ_CLIPS}
        make_nlq_standin(args.root, args.dim or NLQ_DIM, args.seed, sizes)
        return
    if benchmark == QVHIGHLIGHT:
        sizes = None if args.videos is None else {split: args.videos for split in QVHIGHLIGHTS_QUERIES}
        make_qvhighlights_standin(args.root, args.lighthouse_dims, args.seed, sizes)
        return
    if args.layout == "lighthouse":
        make_lighthouse_standin(benchmark, args.annotations, args.root, args.lighthouse_dims, args.seed, args.videos)
        return
    make_standin(benchmark, args.annotations, args.root, args.dim, args.seed, args.clips_per_second, args.videos)
    if benchmark == "charades":
        write_charades_text_form(args.root)


def main():
    args = parse_args()
    setup_logger(None)
    benchmarks = sorted(LIGHTHOUSE) + [QVHIGHLIGHT] if args.layout == "lighthouse" else sorted(BENCHMARKS)
    for benchmark in benchmarks if args.benchmark == "all" else [args.benchmark]:
        start = time.perf_counter()
        write(benchmark, args)
        print(f"{benchmark}: written under {args.root} in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    run_cli(main)
