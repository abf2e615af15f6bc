#!/usr/bin/env python
"""Evaluate a 2D-TAN checkpoint on DATASETS.TEST.

The checkpoint is --ckpt, else the latest in OUTPUT_DIR, else MODEL.WEIGHT;
with none of them the model is untrained (a warning says so).

Examples:
  python tools/test_net.py --config-file configs/2dtan_synthetic.yaml
  python tools/test_net.py --config-file configs/2dtan_synthetic.yaml --ckpt outputs/synthetic/model_3e.pth
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tan.engine.defaults import default_argument_parser, default_setup, run_cli  # noqa: E402
from tan.engine.recipes import wrap_distributed, run_test  # noqa: E402
from tan.engine.precision import prepare_model  # noqa: E402
from tan.modeling import build_model  # noqa: E402
from tan.utils.checkpoint import Checkpointer, load_model_weights, model_state_from, read_checkpoint  # noqa: E402
from tan.utils.logger import get_logger  # noqa: E402


def main(argv=None):
    parser = default_argument_parser("Evaluate a 2D-TAN checkpoint.", __doc__.split("\n\n", 1)[1])
    parser.add_argument("--ckpt", default="", metavar="PATH", help="checkpoint to evaluate")
    args = parser.parse_args(argv)
    cfg, device, distributed = default_setup(args, save=False)
    model = prepare_model(cfg, build_model(cfg).to(device), device)
    checkpoint = args.ckpt or Checkpointer(model, save_dir=cfg.OUTPUT_DIR).last_checkpoint() or cfg.MODEL.WEIGHT
    if checkpoint:
        load_model_weights(model, model_state_from(read_checkpoint(checkpoint), checkpoint), checkpoint)
        get_logger().info("evaluating %s", checkpoint)
    else:
        get_logger().warning("NO CHECKPOINT: no --ckpt, no checkpoint in %s and no MODEL.WEIGHT; "
                             "evaluating an UNTRAINED model", cfg.OUTPUT_DIR)
    run_test(cfg, wrap_distributed(model, device, distributed), device, distributed, checkpoint)


if __name__ == "__main__":
    run_cli(main)
