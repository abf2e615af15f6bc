"""Testing a model on every dataset of DATASETS.TEST, and where the results go."""
import os

import torch

from ..utils import comm
from ..utils.checkpoint_file import BEST, checkpoint_name, load_model_weights, model_state_from, read_checkpoint
from ..utils.logger import get_logger
from ..evaluation import format_table
from .inference import inference
from .long_videos.windowed_evaluation import WindowedEvaluation
from .long_videos.windows import window_settings
from .wrappers import unwrap


def results_folder(output_dir, checkpoint):
    """Where the test results of ``checkpoint`` go: OUTPUT_DIR/inference/{checkpoint name}/
    ("untrained" without a checkpoint), one sub-folder per dataset."""
    return os.path.join(output_dir, "inference", checkpoint_name(checkpoint) if checkpoint else "untrained")


def windowed_evaluation(cfg, trained_span):
    """The windows of an evaluation (tan.engine.long_videos.windowed_evaluation.WindowedEvaluation) or None, from
    TEST.WINDOW and ``trained_span`` (what the training videos last: the training data's, or the
    checkpoint's record); the choice is logged."""
    settings, choice = window_settings(cfg, trained_span, evaluation=True)
    get_logger("test").info("long videos: %s", choice)
    return WindowedEvaluation(cfg, settings) if settings is not None else None


def run_test(cfg, model, device, distributed, data, checkpoint="", folder=None, loaders=None, trained_span=None,
             evaluated=None, kept=None):
    """Evaluate on every dataset of DATASETS.TEST; results under ``folder``/{name}/
    (default :func:`results_folder` of OUTPUT_DIR and ``checkpoint``). ``loaders``: the test
    loaders (default: the run data's, grouped as the model's class says); ``trained_span``: what
    the training videos last, for the videos longer than them (tan.engine.long_videos.windows).
    ``evaluated``: {name: tan.engine.inference.Evaluation} of these very weights, done already
    (None on ranks other than 0): their files are written, not evaluated again. ``kept``: a dict
    that gets this test's evaluations."""
    folder = folder or results_folder(cfg.OUTPUT_DIR, checkpoint)
    if loaders is None:
        loaders = data.test_loaders(distributed, data.declared.batches_by_video)
    evaluated = evaluated or {}
    windows = windowed_evaluation(cfg, trained_span) if any(l.dataset.name not in evaluated for l in loaders) else None
    results = {}
    for loader in loaders:
        name = loader.dataset.name
        output = os.path.join(folder, name) if comm.is_main_process() else None
        if name in evaluated:  # every rank knows the name; rank 0 holds the evaluation
            done = evaluated[name]
            if done is not None:
                get_logger("test").info("%s: these weights were evaluated on it already in this run; its results "
                                        "are written for %s, not computed again%s", name,
                                        checkpoint_name(checkpoint),
                                        "\n" + format_table(done.results, f"results on {name}:")
                                        if done.results else "")
                done.write(output, checkpoint)
            results[name] = done.results if done is not None else None
            if kept is not None:
                kept[name] = done
        else:
            results[name] = inference(model, loader, name, cfg.TEST.NMS_THRESH, device, output, checkpoint,
                                      amp=cfg.SOLVER.AMP, nms_units=cfg.TEST.NMS_UNITS, detr=cfg.TEST.DETR_METRICS,
                                      windows=windows, evaluations=kept, evaluators=cfg.TEST.EVALUATORS)
        comm.synchronize()
    return results


def same_weights(model, state):
    """Whether ``model`` holds the weights of the state dict ``state`` exactly."""
    own = model.state_dict()
    return own.keys() == state.keys() and all(
        torch.equal(own[k].detach().cpu(), state[k].detach().cpu()) for k in own)


def test_final_and_best(cfg, model, device, distributed, data, checkpoint, loaders, evaluated=None):
    """Test the final model, then model_best.pth when training kept one, on ``loaders``; logs both
    side by side. Long videos are windowed as the training data's span says. ``evaluated``: the
    evaluations the training already made of the final weights (:func:`run_test`); a set of weights
    is evaluated once, so a best model that is the final one gets the final's results."""
    logger = get_logger("test")
    span = data.trained_span()
    final = {}
    results = {"final": run_test(cfg, model, device, distributed, data, checkpoint, loaders=loaders,
                                 trained_span=span, evaluated=evaluated, kept=final)}
    best_path = os.path.join(cfg.OUTPUT_DIR, BEST)
    if not os.path.isfile(best_path):
        return results
    best_checkpoint = read_checkpoint(best_path)
    best_state = model_state_from(best_checkpoint, best_path)
    info = best_checkpoint.get("best", {})
    logger.info("testing the best model: epoch %s, %s %.2f on %s", info.get("epoch", "?"), info.get("metric", "?"),
                info.get("value", float("nan")), info.get("dataset", "?"))
    if not comm.reduce_max_int(not same_weights(unwrap(model), best_state)):  # every rank decides alike
        logger.info("%s holds the final model's weights: its results are the final model's", best_path)
        results["best"] = run_test(cfg, model, device, distributed, data, best_path, loaders=loaders,
                                   trained_span=span, evaluated=final)
    else:
        load_model_weights(unwrap(model), best_state, best_path)
        results["best"] = run_test(cfg, model, device, distributed, data, best_path, loaders=loaders,
                                   trained_span=span)
    if comm.is_main_process():
        metric = cfg.TEST.BEST_METRIC
        for name in (n for n in results["final"] if metric in results["final"][n]):  # not a split without labels
            logger.info("%s on %s: final model %.2f, best model (epoch %s) %.2f", metric, name,
                        results["final"][name].get(metric, float("nan")), info.get("epoch", "?"),
                        results["best"][name].get(metric, float("nan")))
    return results
