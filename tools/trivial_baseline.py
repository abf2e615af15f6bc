#!/usr/bin/env python
"""The "most common moment" baseline (docs/data.md §8.3), to put model figures in context.

Each training moment is mapped to its best-matching valid cell of the N x N
grid (relative to its video's duration); the five most frequent cells are
predicted, in order, for every test query, ignoring the video and sentence.

Example:
  python tools/trivial_baseline.py --config-file configs/2dtan_synthetic.yaml
"""
import checkout_path  # noqa: F401  (this checkout's tan first on sys.path)
import torch

from tan_apps.cli.arguments import default_argument_parser
from tan_apps.cli.exit_codes import run_cli
from tan.config import load_config
from tan.data import RunData
from tan.evaluation import evaluate_moments, format_table
from tan.config.architecture import model_settings
from tan.modeling.map2d.feat2d import build_mask2d
from tan.structures.moments import iou2d
from tan.utils.logger import setup_logger
import tan_apps.synthetic  # noqa: F401  (the built-in synthetic dataset, written on first use)


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
    arch = model_settings(cfg)
    n = arch.NUM_CLIPS
    mask2d = build_mask2d(n, arch.FEAT2D.POOLING_COUNTS)
    data = RunData(cfg)  # the vocabulary and the datasets are built once for both splits
    cells = most_common_cells([data.dataset(name) for name in cfg.DATASETS.TRAIN], n, mask2d)
    starts, ends = (cells // n).float() / n, (cells % n + 1).float() / n  # fractions of the video
    for d in (data.dataset(name) for name in cfg.DATASETS.TEST):
        durations = torch.from_numpy(d.durations)[:, None]
        predicted = torch.stack([starts * durations, ends * durations], dim=-1)  # [Q, 5, 2]
        results = evaluate_moments(predicted, torch.ones(predicted.shape[:2], dtype=torch.bool),
                                   torch.from_numpy(d.windows))  # every window, as the models are scored
        print(format_table(results, f"most-common-moment baseline on {d.name}:"))


if __name__ == "__main__":
    run_cli(main)
