"""Write the built-in synthetic video dataset: short videos of coloured shapes
acting out the moments of their sentences, their annotations (JSON lines)
and a catalog naming the feature folders that tan-extract-features fills
(docs/video.md).

Example (the first run from video files, docs/quickstart.md):
  tan-synthetic-videos --output datasets/synthetic_videos
"""
import argparse

from tan.errors import TanError
from tan_apps.cli import signal_exits
from tan_apps.cli.exit_codes import run_cli


def build_parser():
    from tan_apps.synthetic.videos import SPLITS

    parser = argparse.ArgumentParser(description="Write the synthetic video dataset (videos, annotations, catalog).",
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", required=True, metavar="DIR", help="the dataset's folder (its DATASETS.ROOT)")
    parser.add_argument("--train-videos", type=int, default=SPLITS["train"],
                        help=f"videos in the train split (default {SPLITS['train']})")
    parser.add_argument("--test-videos", type=int, default=SPLITS["test"],
                        help=f"videos in the test split (default {SPLITS['test']})")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: the built-in one)")
    return parser


def main(argv=None):
    from tan_apps.synthetic.videos import SEED, generate

    args = build_parser().parse_args(argv)
    for name in ("train_videos", "test_videos"):
        if getattr(args, name) < 1:
            raise TanError(f"--{name.replace('_', '-')} {getattr(args, name)}: expected at least 1")
    signal_exits.now_doing("writing synthetic videos", f"each file in {args.output} is complete or absent")
    counts = generate(args.output, SEED if args.seed is None else args.seed,
                      {"train": args.train_videos, "test": args.test_videos})
    print(f"wrote {args.train_videos + args.test_videos} videos and "
          f"{', '.join(f'{n} {split} queries' for split, n in counts.items())} to {args.output}", flush=True)


def cli():
    run_cli(main)
