#!/usr/bin/env python
"""Cut Ego4D NLQ's clip features from its per-video features: for every clip of the annotation
files, the rows int(video_start_sec * rate) to int(video_end_sec * rate) of its video, into one
HDF5 file with a dataset per clip_uid, which the built-in ego4d_nlq_* datasets read
(docs/long_videos.md, "Ego4D NLQ"). The file appears complete or not at all.

Example (Ego4D's SlowFast features, one {video_uid}.pt per video):
  python tools/ego4d_nlq_clips.py --annotations datasets/ego4d/annotations/nlq_train.json \\
      datasets/ego4d/annotations/nlq_val.json --video-features ego4d_data/v1/slowfast8x8_r101_k400 \\
      --output datasets/ego4d/features/nlq_clips.hdf5
"""
import argparse

import checkout_path  # noqa: F401  (this checkout's tan first on sys.path)
from tan_apps.cli.exit_codes import run_cli
from tan_apps.converters.ego4d_nlq import SLOWFAST_RATE, cut_nlq_clips


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--annotations", nargs="+", required=True, help="NLQ annotation files (nlq_*.json)")
    parser.add_argument("--video-features", required=True,
                        help="a folder of {video_uid}.pt (Ego4D's release) or .npy / .npz files, or an HDF5 file")
    parser.add_argument("--output", required=True, help="the HDF5 file to write")
    parser.add_argument("--rate", type=float, default=SLOWFAST_RATE,
                        help=f"feature rows a second (default {SLOWFAST_RATE}: SlowFast's, 16 frames at 30 fps)")
    args = parser.parse_args()
    summary = cut_nlq_clips(args.annotations, args.video_features, args.output, args.rate)
    print(f"{summary['clips']} clips of {summary['videos']} videos ({summary['rows']} rows) written to {args.output}")


if __name__ == "__main__":
    run_cli(main)
