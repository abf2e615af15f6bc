#!/usr/bin/env python
"""The long synthetic benchmark (docs/long_videos.md): a model trained on the synthetic dataset's
24-80 s videos asked about short moments of long videos made of the dataset's moments
(tan_apps/synthetic/long_videos.py), each video scored whole (resampled to the model's clips) and
by windows (TEST.WINDOW). Prints R@1 and R@5 at IoU 0.5 and the mean IoU of the first moment.

Examples (after the README's quick start):
  python tools/long_synthetic.py --ckpt outputs/synthetic/model_final.pth --seconds 300 3600 --queries 40
  python tools/long_synthetic.py --write long_video.npy --seconds 3600 --seed 0   # one video, for tan-predict
"""
import argparse
import json
import logging
import sys

import numpy as np

import checkout_path  # noqa: F401  (this checkout's tan first on sys.path)
import torch

import tan
from tan.structures.moments import temporal_iou
from tan_apps.synthetic.long_videos import long_video


def evaluate(model, seconds, queries, moment_seconds):
    """(R@1, R@5 at IoU 0.5 in percent, mean IoU of the first moment) over ``queries`` videos (seeds 0..)."""
    top1 = top5 = 0
    first_ious = []
    for seed in range(queries):
        feats, duration, sentence, moment = long_video(seconds, moment_seconds, seed)
        moments = model.ground(model.encode_video(feats, duration), [sentence], topk=5)[0]
        ious = [float(temporal_iou(torch.tensor([[m.start, m.end]]), torch.tensor([moment]))) for m in moments]
        first_ious.append(ious[0] if ious else 0.0)
        top1 += bool(ious) and ious[0] >= 0.5
        top5 += any(i >= 0.5 for i in ious)
    return 100.0 * top1 / queries, 100.0 * top5 / queries, sum(first_ious) / queries


def build_parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ckpt", help="a checkpoint of a model trained on the synthetic dataset")
    parser.add_argument("--write", metavar="FILE.npy",
                        help="instead: write one video's features [T, 128] (the first of --seconds, --seed) to FILE.npy "
                             "and print its duration, sentence and moment")
    parser.add_argument("--seed", type=int, default=0, help="--write: which video")
    parser.add_argument("--seconds", type=float, nargs="+", default=[300.0, 3600.0], help="video lengths")
    parser.add_argument("--queries", type=int, default=40, help="videos (one query each) per length")
    parser.add_argument("--moment-seconds", type=float, default=10.0, help="the asked moment's length")
    parser.add_argument("opts", nargs=argparse.REMAINDER, metavar="KEY VALUE", help="config overrides")
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.write:
        feats, duration, sentence, moment = long_video(args.seconds[0], args.moment_seconds, args.seed)
        np.save(args.write, feats)
        print(json.dumps({"features": args.write, "duration": duration, "sentence": sentence, "moment": moment}))
        return 0
    if not args.ckpt:
        raise SystemExit("give --ckpt (a model trained on the synthetic dataset), or --write FILE.npy")
    logging.disable(logging.WARNING)  # one line per unknown word of the templates; the table is the output
    models = {way: tan.load_model(args.ckpt, overrides=[*args.opts, "TEST.WINDOW.ENABLED", str(way == "windows")])
              for way in ("whole", "windows")}
    print("| video | queries | whole: R@1 | R@5 | mIoU@1 | windows: R@1 | R@5 | mIoU@1 |\n|---|---|---|---|---|---|---|---|")
    for seconds in args.seconds:
        row = [evaluate(models[way], seconds, args.queries, args.moment_seconds) for way in ("whole", "windows")]
        cells = " | ".join(f"{r1:.1f} | {r5:.1f} | {iou:.3f}" for r1, r5, iou in row)
        print(f"| {seconds:g} s | {args.queries} | {cells} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
