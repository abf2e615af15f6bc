#!/usr/bin/env python
"""Train 2D-TAN from a config, then test it on DATASETS.TEST.

Examples:
  python tools/train_net.py --config-file configs/2dtan_synthetic.yaml
  python tools/train_net.py --config-file configs/2dtan_128x128_pool_k5l8_tacos.yaml OUTPUT_DIR outputs/tacos
  torchrun --nproc_per_node=4 tools/train_net.py --config-file FILE SOLVER.BATCH_SIZE 32
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tan.engine.defaults import default_argument_parser, default_setup, run_cli  # noqa: E402
from tan.engine.recipes import run_test, train  # noqa: E402


def main(argv=None):
    parser = default_argument_parser("Train 2D-TAN, then test it.", __doc__.split("\n\n", 1)[1])
    parser.add_argument("--skip-test", action="store_true", help="do not test after training")
    args = parser.parse_args(argv)
    cfg, device, distributed = default_setup(args)
    model, checkpoint = train(cfg, device, distributed)
    if not args.skip_test:
        run_test(cfg, model, device, distributed, checkpoint)


if __name__ == "__main__":
    run_cli(main)
