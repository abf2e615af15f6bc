#!/usr/bin/env python
"""The long synthetic benchmark (docs/long_videos.md): a model trained on the synthetic dataset's
24-80 s videos asked about short moments of long videos made of the dataset's moments
(tan_apps/synthetic/long_videos.py), each video scored whole (resampled to the model's clips) and
by windows (TEST.WINDOW). Prints R@1 and R@5 at IoU 0.5 and the mean IoU of the first moment.

With --video-files DIR the long videos are video files instead, of the synthetic video
dataset's stage (tan-synthetic-videos --long-video: one asked moment among others of other
shapes), written to DIR and grounded from the file (its features made by the checkpoint's
recorded extractors) by a model trained on that dataset (docs/quickstart.md, "From video files").

Examples (after the README's quick start; the third after docs/quickstart.md's video block):
  python tools/long_synthetic.py --ckpt outputs/synthetic/model_final.pth --seconds 300 3600 --queries 40
  python tools/long_synthetic.py --write long_video.npy --seconds 3600 --seed 0   # one video, for tan-predict
  python tools/long_synthetic.py --ckpt outputs/mmn_synthetic_videos/model_final.pth --video-files long_videos \
      --seconds 3600 --queries 5
"""
import argparse
import json
import logging
import math
import os
import sys

import numpy as np

import checkout_path  # noqa: F401  (this checkout's tan first on sys.path)
import torch

import tan
from tan.errors import TanError
from tan.structures.moments import temporal_iou
from tan_apps.commands.predict import extractor_models
from tan_apps.synthetic.features import CLIP_SECONDS
from tan_apps.synthetic.long_videos import long_video
from tan_apps.synthetic.videos import FPS, write_long_video

VIDEO_FRAME_SECONDS = 1 / FPS


def feature_videos(seconds, queries, moment_seconds):
    """(features, duration, sentence, moment) of ``queries`` long videos of clip features (seeds 0..)."""
    return [long_video(seconds, moment_seconds, seed) for seed in range(queries)]


def file_videos(featurize, folder, seconds, queries, moment_seconds):
    """The same of ``queries`` long video files written to ``folder`` (seeds 0..), their features made
    by ``featurize`` (the checkpoint's recorded extractors) once for both ways of grounding.

    A video and its features already in ``folder`` from an earlier run with the same length, moment
    and extractors are read back rather than made again (an hour's file takes minutes to write and
    to featurize), so that two checkpoints are compared on the same files."""
    videos = []
    for seed in range(queries):
        path = os.path.join(folder, f"synvid_long_{seconds:g}s_{moment_seconds:g}m_{seed}.mp4")
        key = json.dumps({"records": featurize.records, "seconds": seconds, "moment_seconds": moment_seconds,
                          "seed": seed}, sort_keys=True, default=str)
        cached = _cached(path, key)
        if cached is None:
            written = write_long_video(path, seconds, moment_seconds, seed)
            features, duration = featurize(written["video"])
            cached = (features, duration, written["sentence"], written["moment"])
            _store(path, key, cached)
        videos.append(cached)
    return videos


def _cached(path, key):
    """(features, duration, sentence, moment) stored beside ``path`` under ``key``, or None."""
    try:
        with open(path + ".json") as f:
            meta = json.load(f)
        if meta["key"] != key or not os.path.exists(path):
            return None
        return np.load(path + ".features.npy"), meta["duration"], meta["sentence"], meta["moment"]
    except (OSError, ValueError, KeyError):
        return None


def _store(path, key, video):
    """Store ``video``'s features and answer beside ``path``, the description last (its presence says
    the features are whole)."""
    features, duration, sentence, moment = video
    with open(path + ".features.npy.part", "wb") as f:
        np.save(f, features)
    os.replace(path + ".features.npy.part", path + ".features.npy")
    with open(path + ".json.part", "w") as f:
        json.dump({"key": key, "duration": duration, "sentence": sentence, "moment": list(moment)}, f)
    os.replace(path + ".json.part", path + ".json")


def evaluate(model, videos):
    """(R@1, R@5 at IoU 0.5 in percent, mean IoU of the first moment) over ``videos`` (one query each)."""
    top1 = top5 = 0
    first_ious = []
    for feats, duration, sentence, moment in videos:
        moments = model.ground(model.encode_video(feats, duration), [sentence], topk=5)[0]
        ious = [float(temporal_iou(torch.tensor([[m.start, m.end]]), torch.tensor([moment]))) for m in moments]
        first_ious.append(ious[0] if ious else 0.0)
        top1 += bool(ious) and ious[0] >= 0.5
        top5 += any(i >= 0.5 for i in ious)
    return 100.0 * top1 / len(videos), 100.0 * top5 / len(videos), sum(first_ious) / len(videos)


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
    parser.add_argument("--video-files", metavar="DIR",
                        help="video files of the synthetic video dataset's stage, written to DIR, instead of clip "
                             "features (--ckpt: a model trained on that dataset)")
    parser.add_argument("--extractor-model", action="append", default=[], metavar="NAME=FOLDER",
                        help="with --video-files: where a recorded extractor model (its recorded name or folder "
                             "name) is now, as for tan-predict")
    parser.add_argument("opts", nargs=argparse.REMAINDER, metavar="KEY VALUE", help="config overrides")
    return parser


def _check(args):
    """What numpy or the generators would end in a traceback for, refused in one line."""
    if args.seed < 0:
        raise SystemExit(f"--seed {args.seed}: expected a number of 0 or more")
    shortest = VIDEO_FRAME_SECONDS if args.video_files else CLIP_SECONDS  # a shorter moment has no frame or row
    if not args.moment_seconds >= shortest:
        raise SystemExit(f"--moment-seconds {args.moment_seconds:g}: a moment lasts at least a "
                         f"{'frame' if args.video_files else 'clip'}; give {shortest:g} or more")
    if args.video_files and not all(2 * args.moment_seconds <= seconds for seconds in args.seconds):
        raise SystemExit(f"--seconds: a long video file must last at least twice --moment-seconds "
                         f"({args.moment_seconds:g} s)")
    clips = round(args.moment_seconds / CLIP_SECONDS)  # what long_video counts in: clips of CLIP_SECONDS
    if not all(math.isfinite(seconds) and clips < round(seconds / CLIP_SECONDS) for seconds in args.seconds):
        raise SystemExit(f"--seconds: a long video must last longer than --moment-seconds ({args.moment_seconds:g} s) "
                         f"by a clip ({CLIP_SECONDS:g} s) or more")


def main(argv=None):
    args = build_parser().parse_args(argv)
    _check(args)
    if args.write:
        feats, duration, sentence, moment = long_video(args.seconds[0], args.moment_seconds, args.seed)
        np.save(args.write, feats)
        print(json.dumps({"features": args.write, "duration": duration, "sentence": sentence, "moment": moment}))
        return 0
    if not args.ckpt:
        raise SystemExit("give --ckpt (a model trained on the synthetic dataset), or --write FILE.npy")
    logging.disable(logging.WARNING)  # one line per unknown word of the templates; the table is the output
    try:
        moved = extractor_models(args.extractor_model)
    except TanError as e:
        raise SystemExit(str(e)) from None
    models = {way: tan.load_model(args.ckpt, overrides=[*args.opts, "TEST.WINDOW.ENABLED", str(way == "windows")],
                                  extractor_models=moved)
              for way in ("whole", "windows")}
    print("| video | queries | whole: R@1 | R@5 | mIoU@1 | windows: R@1 | R@5 | mIoU@1 |\n|---|---|---|---|---|---|---|---|")
    if args.video_files:
        from tan.video.featurize import VideoFeaturizer

        os.makedirs(args.video_files, exist_ok=True)
        featurize = VideoFeaturizer(models["windows"].extractors, models["windows"].device, moved)
    for seconds in args.seconds:
        videos = (file_videos(featurize, args.video_files, seconds, args.queries, args.moment_seconds)
                  if args.video_files else feature_videos(seconds, args.queries, args.moment_seconds))
        row = [evaluate(models[way], videos) for way in ("whole", "windows")]
        cells = " | ".join(f"{r1:.1f} | {r5:.1f} | {iou:.3f}" for r1, r5, iou in row)
        print(f"| {seconds:g} s | {args.queries} | {cells} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
