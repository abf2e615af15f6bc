#!/usr/bin/env python
"""The "most common moment" baseline of DATA.md, to put model figures in context.

Each training moment is mapped to its best-matching valid cell of the N x N
grid (relative to its video's duration); the five most frequent cells are
predicted, in order, for every test query, ignoring the video and sentence.

Example:
  python tools/trivial_baseline.py --config-file configs/2dtan_synthetic.yaml
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

from tan.config import load_config  # noqa: E402
from tan.data import build_datasets  # noqa: E402
from tan.engine.defaults import default_argument_parser, run_cli  # noqa: E402
from tan.engine.evaluation import evaluate_moments, format_table  # noqa: E402
from tan.modeling.feat2d import build_mask2d  # noqa: E402
from tan.modeling.loss import iou2d  # noqa: E402
from tan.utils.logger import setup_logger  # noqa: E402


def most_common_cells(datasets, n, mask2d, k=5):
    counts = torch.zeros(n * n)
    for d in datasets:
        moments, durations = torch.from_numpy(d.moments), torch.from_numpy(d.durations)
        ious = iou2d(moments, durations, n) * mask2d  # [Q, N, N]
        counts += torch.bincount(ious.flatten(1).argmax(dim=1), minlength=n * n).float()
    return counts.argsort(descending=True, stable=True)[:k]


def main(argv=None):
    args = default_argument_parser("Most-common-moment baseline.", __doc__.split("\n\n", 2)[2]).parse_args(argv)
    cfg = load_config(args.config_file, args.opts)
    setup_logger(None)
    n = cfg.MODEL.TAN.NUM_CLIPS
    mask2d = build_mask2d(n, cfg.MODEL.TAN.FEAT2D.POOLING_COUNTS)
    cells = most_common_cells(build_datasets(cfg, cfg.DATASETS.TRAIN), n, mask2d)
    starts, ends = (cells // n).float() / n, (cells % n + 1).float() / n  # fractions of the video
    for d in build_datasets(cfg, cfg.DATASETS.TEST):
        durations = torch.from_numpy(d.durations)[:, None]
        predicted = torch.stack([starts * durations, ends * durations], dim=-1)  # [Q, 5, 2]
        results = evaluate_moments(predicted, torch.ones(predicted.shape[:2], dtype=torch.bool),
                                   torch.from_numpy(d.moments))
        print(format_table(results, f"most-common-moment baseline on {d.name}:"))


if __name__ == "__main__":
    run_cli(main)
