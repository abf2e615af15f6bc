"""Train the model of a config (MODEL.ARCHITECTURE: a built-in one or a plug-in's), then test the final and best models.

Arguments after the options are config overrides, KEY VALUE pairs of keys
in tan/config/defaults.py and in the model's own settings. Run under torchrun for several processes.

Examples:
  tan-train --config-file configs/2dtan_synthetic.yaml
  tan-train --config-file configs/2dtan_128x128_pool_k5l8_tacos.yaml OUTPUT_DIR outputs/tacos SOLVER.AMP bf16
  torchrun --nproc_per_node=4 tools/train_net.py --config-file FILE SOLVER.BATCH_SIZE 32
  tan-train --config-file configs/2dtan_synthetic.yaml --seeds 1 2 3 4 OUTPUT_DIR outputs/synthetic_seeds
"""
from tan.config import load_config
from tan.engine.run_folder import ACCEPT_FLAG
from tan.engine.trainer import build_trainer
from tan_apps.cli import signal_exits
from tan_apps.cli.arguments import default_argument_parser
from tan_apps.cli.exit_codes import run_cli
from tan_apps.seeds.launcher import add_seed_arguments, check_seed_arguments, run_seeds


def build_parser():
    parser = default_argument_parser("Train a grounding model, then test it.", __doc__.split("\n\n", 1)[1])
    parser.add_argument("--skip-test", action="store_true",
                        help="do not test after training (test later with tan-test)")
    parser.add_argument(ACCEPT_FLAG, action="store_true",
                        help="continue the run in OUTPUT_DIR although keys that alter results differ from its "
                             "config.yml: the new values hold from the next step (the learning rate and schedule "
                             "included; a higher SOLVER.MAX_EPOCH continues a finished run) and the change is "
                             "recorded in OUTPUT_DIR/config_history.jsonl")
    add_seed_arguments(parser)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    check_seed_arguments(args)
    if args.seeds:
        signal_exits.now_doing("training seeds", "each seed's checkpoints are kept; run the same command again to "
                                                 "resume (finished seeds are kept as they are)")
        return run_seeds(args)
    signal_exits.now_doing("preparing the run", "checkpoints and results are kept as they were")
    cfg = load_config(args.config_file, args.opts)  # loads the config's PLUGINS: their trainers are registered
    with build_trainer(cfg, args) as trainer:  # the run set up: checked, OUTPUT_DIR locked, logging
        # Building the model and the datasets, resuming. Once the loop runs, a
        # Ctrl-C saves a checkpoint instead (TrainingInterrupted).
        signal_exits.now_doing("preparing to train", "checkpoints saved so far are kept; run the same command again "
                                                     "to resume")
        checkpoint = trainer.train()
        if not args.skip_test:
            signal_exits.now_doing("testing", f"checkpoints and earlier results are kept; test {checkpoint} later "
                                              f"with tan-test")
            trainer.test(checkpoint)


def cli():
    run_cli(main)


if __name__ == "__main__":  # python -m tan_apps.commands.train: how --seeds starts each seed
    cli()
