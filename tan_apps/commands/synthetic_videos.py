"""Write the built-in synthetic video dataset: short videos of coloured shapes
acting out the moments of their sentences, their annotations (JSON lines)
and a catalog naming the feature folders that tan-extract-features fills
(docs/video.md).

Examples (the first run from video files, docs/quickstart.md; videos of 2 to 5
minutes with a moment about every 25 s, to train by windows on; a one-hour video
of the same stage with one 10-second moment to ask about, docs/long_videos.md):
  tan-synthetic-videos --output datasets/synthetic_videos
  tan-synthetic-videos --output datasets/synthetic_long_videos --long
  tan-synthetic-videos --output datasets/synthetic_videos --long-video 3600
"""
import argparse
import json
import math
import os

from tan.errors import TanError
from tan_apps.cli import signal_exits
from tan_apps.cli.exit_codes import run_cli


LONG_MOMENT_SECONDS = 10.0  # --long-video's asked moment, unless --moment-seconds says otherwise


def build_parser():
    from tan_apps.synthetic.videos import LONG_SPLITS, SPLITS

    parser = argparse.ArgumentParser(description="Write the synthetic video dataset (videos, annotations, catalog).",
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", required=True, metavar="DIR", help="the dataset's folder (its DATASETS.ROOT)")
    parser.add_argument("--train-videos", type=int, default=None,
                        help=f"videos in the train split (default {SPLITS['train']}; {LONG_SPLITS['train']} with --long)")
    parser.add_argument("--test-videos", type=int, default=None,
                        help=f"videos in the test split (default {SPLITS['test']}; {LONG_SPLITS['test']} with --long)")
    parser.add_argument("--long", action="store_true",
                        help="videos of 2 to 5 minutes, a moment of 2 to 12 s about every 25 s, each asked once "
                             "(catalog entries synthetic_long_videos_train and _test), to train by windows on")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: the built-in one; 0 "
                                                                "for --long-video)")
    parser.add_argument("--long-video", type=float, default=None, metavar="SECONDS",
                        help="instead: write one video of SECONDS of the same stage to DIR/videos/"
                             "synvid_long_{SECONDS}s_{seed}.mp4, with one moment of --moment-seconds among "
                             "others of other shapes, and print its sentence and moment as JSON")
    parser.add_argument("--moment-seconds", type=float, default=None,
                        help=f"--long-video: the asked moment's length (default {LONG_MOMENT_SECONDS:g})")
    return parser


def main(argv=None):
    from tan_apps.synthetic.videos import LONG_SPLITS, SEED, SPLITS, generate

    args = build_parser().parse_args(argv)
    if args.seed is not None and args.seed < 0:  # numpy's generators take none below 0
        raise TanError(f"--seed {args.seed}: expected a number of 0 or more")
    if args.long_video is not None:
        if args.long:
            raise TanError("--long writes a dataset of long videos, --long-video one video: give one of them")
        if args.train_videos is not None or args.test_videos is not None:
            raise TanError("--train-videos and --test-videos go with a dataset; --long-video writes one video: "
                           "give one of them")
        return write_long(args)
    if args.moment_seconds is not None:  # it would be ignored without a word
        raise TanError("--moment-seconds goes with --long-video (the datasets' moments have lengths of their own)")
    defaults = LONG_SPLITS if args.long else SPLITS
    args.train_videos = defaults["train"] if args.train_videos is None else args.train_videos
    args.test_videos = defaults["test"] if args.test_videos is None else args.test_videos
    for name in ("train_videos", "test_videos"):
        if getattr(args, name) < 1:
            raise TanError(f"--{name.replace('_', '-')} {getattr(args, name)}: expected at least 1")
    signal_exits.now_doing("writing synthetic videos", f"each file in {args.output} is complete or absent")
    counts = generate(args.output, SEED if args.seed is None else args.seed,
                      {"train": args.train_videos, "test": args.test_videos}, long=args.long)
    print(f"wrote {args.train_videos + args.test_videos} videos and "
          f"{', '.join(f'{n} {split} queries' for split, n in counts.items())} to {args.output}", flush=True)


def write_long(args):
    from tan_apps.synthetic.videos import FPS, write_long_video

    seed = 0 if args.seed is None else args.seed
    if args.moment_seconds is None:
        args.moment_seconds = LONG_MOMENT_SECONDS
    if not args.moment_seconds >= 1 / FPS:  # a shorter one rounds to no frame: a moment from t to t
        raise TanError(f"--moment-seconds {args.moment_seconds:g}: a moment lasts at least a frame; give "
                       f"{1 / FPS:g} or more (the videos have {FPS} frames per second)")
    if not (math.isfinite(args.long_video) and 0 < 2 * args.moment_seconds <= args.long_video):
        raise TanError(f"--long-video {args.long_video:g} with --moment-seconds {args.moment_seconds:g}: expected a "
                       f"positive moment at most half the video's length")
    path = os.path.join(args.output, "videos", f"synvid_long_{args.long_video:g}s_{seed}.mp4")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    signal_exits.now_doing("writing a long synthetic video", f"{path} is complete or absent")
    print(json.dumps(write_long_video(path, args.long_video, args.moment_seconds, seed)), flush=True)


def cli():
    run_cli(main)
