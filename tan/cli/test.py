"""Evaluate a 2D-TAN checkpoint on DATASETS.TEST.

The checkpoint is --ckpt, else the latest in OUTPUT_DIR, else MODEL.WEIGHT;
with none of them the model is untrained (a warning says so). Metrics and
per-query predictions go to OUTPUT_DIR/inference/{dataset}/.

Examples:
  tan-test --config-file configs/2dtan_synthetic.yaml
  tan-test --config-file configs/2dtan_synthetic.yaml --ckpt outputs/synthetic/model_best.pth
  torchrun --nproc_per_node=2 tools/test_net.py --config-file FILE --ckpt model_final.pth
"""
from ..engine.recipes import run_test
from ..engine.wrappers import prepare_model, wrap_distributed
from ..modeling import build_model
from ..utils.checkpoint import Checkpointer, load_model_weights, model_state_from, read_checkpoint
from ..utils.logger import get_logger
from .arguments import default_argument_parser
from . import interrupts
from .exits import run_cli
from .setup import default_setup


def main(argv=None):
    parser = default_argument_parser("Evaluate a 2D-TAN checkpoint.", __doc__.split("\n\n", 1)[1])
    parser.add_argument("--ckpt", default="", metavar="PATH",
                        help="checkpoint to evaluate (default: the latest in OUTPUT_DIR, else MODEL.WEIGHT)")
    args = parser.parse_args(argv)
    interrupts.now_doing("preparing the run", "checkpoints and results are kept as they were")
    run = default_setup(args, training=False)
    interrupts.now_doing("testing", "checkpoints and earlier results are kept")
    cfg = run.cfg
    model = prepare_model(cfg, build_model(cfg).to(run.device))
    checkpoint = args.ckpt or Checkpointer(model, save_dir=cfg.OUTPUT_DIR).last_checkpoint() or cfg.MODEL.WEIGHT
    if checkpoint:
        load_model_weights(model, model_state_from(read_checkpoint(checkpoint), checkpoint), checkpoint)
        get_logger().info("evaluating %s", checkpoint)
    else:
        get_logger().warning("NO CHECKPOINT: no --ckpt, no checkpoint in %s and no MODEL.WEIGHT; "
                             "evaluating an UNTRAINED model", cfg.OUTPUT_DIR)
    run_test(cfg, wrap_distributed(model, run.device, run.distributed), run.device, run.distributed, run.data,
             checkpoint)


def cli():
    run_cli(main)
