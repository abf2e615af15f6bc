"""Evaluate checkpoints on DATASETS.TEST.

--ckpt takes one or more checkpoints, folders (each checkpoint in them) or
glob patterns; without it, the default checkpoint: the latest in OUTPUT_DIR
(model_final.pth once training has finished), else MODEL.WEIGHT, else an
untrained model (a warning says so). A checkpoint saved by tan carries its
config, so --config-file is needed only for others (the reference's).

Each checkpoint's metrics and per-query predictions go to
OUTPUT_DIR/inference/{checkpoint name}/{dataset}/; with several, a comparison
table is printed and written to OUTPUT_DIR/inference/comparison.json and .csv.
OUTPUT_DIR is the command line's, else the config file's, else the
checkpoints' folder.

Every checkpoint is read and checked against its config before any is
evaluated: one that cannot be read (or does not fit) stops the command with
nothing evaluated. With --keep-going it is left out instead, the others are
evaluated and compared, the command names what it left out (also in
OUTPUT_DIR/inference/left_out.json) and ends with exit status 2.

Examples:
  tan-test --config-file configs/2dtan_synthetic.yaml
  tan-test --ckpt outputs/synthetic/model_best.pth
  tan-test --ckpt outputs/synthetic/model_5e.pth outputs/synthetic/model_final.pth outputs/synthetic/model_best.pth
  tan-test --ckpt outputs/synthetic TEST.NMS_THRESH 0.5
  tan-test --config-file configs/2dtan_128x128_pool_k5l8_tacos.yaml --ckpt reference_tacos.pth
  torchrun --nproc_per_node=2 tools/test_net.py --ckpt outputs/tacos/model_final.pth
"""
import os

from tan.data import RunData
from tan.evaluation.comparison import LEFT_OUT_NAME, comparison_rows, format_comparison, write_comparison
from tan.engine.testing import run_test
from tan_apps.seeds.summary import metrics_of, publish_summary, seed_of_checkpoint
from tan.engine.wrappers import prepare_model, wrap_distributed
from tan.errors import TanError
from tan.modeling import build_model
from tan.utils import comm
from tan.utils.checkpoint_file import (check_model_weights, checkpoint_name, load_model_weights, model_state_from,
                                     read_checkpoint, stored_trained_span)
from tan.utils.logger import get_logger
from tan_apps.cli.arguments import default_argument_parser
from tan_apps.cli.checkpoints import KEEP_GOING_FLAG, plan_evaluations
from tan_apps.cli import signal_exits
from tan_apps.cli.exit_codes import run_cli
from tan.engine.setup import EVALUATION_SPLITS, default_setup

def build_parser():
    parser = default_argument_parser(
        "Evaluate checkpoints of grounding models.", __doc__.split("\n\n", 1)[1], config_default=None,
        config_help="YAML config file (default: the config stored in the checkpoint; without --ckpt, "
                    "the TACoS reference config)")
    parser.add_argument("--ckpt", nargs="+", default=[], metavar="PATH",
                        help="checkpoints, folders or glob patterns to evaluate (default: the latest in OUTPUT_DIR, "
                             "else MODEL.WEIGHT)")
    parser.add_argument(KEEP_GOING_FLAG, action="store_true",
                        help="leave out the checkpoints that cannot be read or do not fit their config, evaluate "
                             "the others, then exit with status 2 naming them")
    return parser


def _data_key(cfg):
    """Evaluations whose configs read the same test data share one RunData."""
    return cfg.DATASETS.dump() + cfg.INPUT.dump()


def main(argv=None):
    args = build_parser().parse_args(argv)
    signal_exits.now_doing("preparing the run", "checkpoints and results are kept as they were")
    plan = plan_evaluations(args.ckpt, args.config_file, args.opts, args.keep_going)
    if not plan.evaluations:
        raise TanError(_left_out_text(plan, "no checkpoint could be evaluated"))
    run = default_setup(plan.evaluations[0].cfg, args, training=False)
    try:
        return _evaluate(plan, run, args)
    finally:
        run.close()  # a run refused before it wrote a result takes back the log it started


def _evaluate(plan, run, args):
    """The evaluations of ``plan`` on the ``run`` that default_setup prepared; {name: results}."""
    signal_exits.now_doing("testing", "checkpoints and earlier results are kept")
    logger = get_logger()
    several = len(plan.evaluations) + len(plan.left_out) > 1
    results_dir, evaluations = plan.results_dir, _fitting(plan, several, args.keep_going)
    for warning in plan.warnings:
        logger.warning("%s", warning)
    for _, why in plan.left_out:
        logger.warning("left out (%s): %s", KEEP_GOING_FLAG, why)
    data = {_data_key(run.cfg): run.data}
    results = {}
    for evaluation in evaluations:
        cfg, checkpoint = evaluation.cfg, evaluation.checkpoint
        key = _data_key(cfg)
        if key not in data:
            data[key] = RunData(cfg, splits=EVALUATION_SPLITS)
            data[key].check_files()
        model = prepare_model(cfg, build_model(cfg).to(run.device))
        trained_span = None
        if checkpoint:
            stored = read_checkpoint(checkpoint)
            load_model_weights(model, model_state_from(stored, checkpoint), checkpoint)
            trained_span = stored_trained_span(stored)
            logger.info("evaluating %s", checkpoint)
        else:
            logger.warning("NO CHECKPOINT: no --ckpt, no checkpoint in %s and no MODEL.WEIGHT; "
                           "evaluating an UNTRAINED model", cfg.OUTPUT_DIR)
        folder = os.path.join(results_dir, "inference", evaluation.name)
        results[evaluation.name] = run_test(cfg, wrap_distributed(model, run.device, run.distributed), run.device,
                                            run.distributed, data[key], checkpoint, folder=folder,
                                            trained_span=trained_span)
    if several and comm.is_main_process():
        rows = comparison_rows(results, {e.name: e.checkpoint for e in evaluations})
        paths = write_comparison(os.path.join(results_dir, "inference"), rows, plan.left_out)
        logger.info("comparison (* the best per dataset), also in %s and %s:\n%s%s", *paths, format_comparison(rows),
                    f"\nleft out (also in {LEFT_OUT_NAME}): " + ", ".join(p for p, _ in plan.left_out)
                    if plan.left_out else "")
    if several and comm.is_main_process():
        _summarize_seeds(evaluations, results, os.path.join(results_dir, "inference"), logger)
    if plan.left_out:
        raise TanError(_left_out_text(plan, f"evaluated {len(evaluations)} of "
                                            f"{len(evaluations) + len(plan.left_out)} checkpoints"))
    return results


def _summarize_seeds(evaluations, results, folder, logger):
    """Checkpoints from the seed folders of runs over several seeds (…/RUN/seed_N/model_final.pth): every
    metric summed up over the seeds of each RUN, per checkpoint name and dataset, as tan-train --seeds does.
    One summary for one run (``folder``/seeds_summary.*), one per run (seeds_summary_RUN.*) for several."""
    runs = {}
    for e in evaluations:
        seed = seed_of_checkpoint(e.checkpoint) if e.checkpoint else None
        if seed is not None:
            run = os.path.dirname(os.path.dirname(os.path.abspath(e.checkpoint)))
            runs.setdefault(run, []).append((seed, e))
    runs = {run: found for run, found in runs.items() if len({s for s, _ in found}) >= 2}
    for run, found in runs.items():
        by_seed, folders = {}, {}
        for seed, e in found:
            folders[seed] = os.path.dirname(os.path.abspath(e.checkpoint))
            for dataset, metrics in results[e.name].items():
                by_seed.setdefault(seed, {})[(checkpoint_name(e.checkpoint), dataset)] = metrics_of(metrics)
        # several runs: each summary named by its run's path from their common folder (a/exp -> a_exp)
        name = "" if len(runs) == 1 else os.path.relpath(run, os.path.commonpath(list(runs))).replace(os.sep, "_")
        publish_summary(folder, by_seed, folders, logger, suffix=name, run=run)
    summed = {e.name for found in runs.values() for _, e in found}
    left = [e.checkpoint or "(untrained)" for e in evaluations if e.name not in summed]
    if runs and left:
        logger.info("not in any seed summary (not in a seed folder of a run with two seeds or more): %s",
                    ", ".join(left))


def _fitting(plan, several, keep_going):
    """The evaluations whose checkpoints fit their configs, all checked before any is
    evaluated when there are several (the others are left out with ``keep_going``)."""
    if not several:
        return plan.evaluations
    fitting = []
    for evaluation in plan.evaluations:
        if evaluation.checkpoint:
            try:
                state = model_state_from(read_checkpoint(evaluation.checkpoint), evaluation.checkpoint)
                check_model_weights(build_model(evaluation.cfg), state, evaluation.checkpoint)
            except TanError as e:
                plan.leave_out(evaluation.checkpoint, e, keep_going, 2)
                continue
        fitting.append(evaluation)
    if not fitting:
        raise TanError(_left_out_text(plan, "no checkpoint could be evaluated"))
    return fitting


def _left_out_text(plan, what):
    return f"{what}; left out ({KEEP_GOING_FLAG}): " + "; ".join(why for _, why in plan.left_out)


def cli():
    run_cli(main)
