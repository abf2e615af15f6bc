"""Testing a model on every dataset of DATASETS.TEST, and where the results go."""
import os

from ..utils import comm
from ..utils.checkpoint import BEST, checkpoint_name, load_model_weights, model_state_from, read_checkpoint
from ..utils.logger import get_logger
from .inference import inference
from .wrappers import unwrap


def results_folder(output_dir, checkpoint):
    """Where the test results of ``checkpoint`` go: OUTPUT_DIR/inference/{checkpoint name}/
    ("untrained" without a checkpoint), one sub-folder per dataset."""
    return os.path.join(output_dir, "inference", checkpoint_name(checkpoint) if checkpoint else "untrained")


def run_test(cfg, model, device, distributed, data, checkpoint="", folder=None, loaders=None):
    """Evaluate on every dataset of DATASETS.TEST; results under ``folder``/{name}/
    (default :func:`results_folder` of OUTPUT_DIR and ``checkpoint``). ``loaders``: the test
    loaders (default: the run data's, grouped as the model's class says)."""
    folder = folder or results_folder(cfg.OUTPUT_DIR, checkpoint)
    if loaders is None:
        loaders = data.test_loaders(distributed, data.declared.batches_by_video)
    results = {}
    for loader in loaders:
        name = loader.dataset.name
        output = os.path.join(folder, name) if comm.is_main_process() else None
        results[name] = inference(model, loader, name, cfg.TEST.NMS_THRESH, device, output, checkpoint,
                                  amp=cfg.SOLVER.AMP, nms_units=cfg.TEST.NMS_UNITS, detr=cfg.TEST.DETR_METRICS)
        comm.synchronize()
    return results


def test_final_and_best(cfg, model, device, distributed, data, checkpoint, loaders):
    """Test the final model, then model_best.pth when training kept one, on ``loaders``; logs both
    side by side."""
    logger = get_logger("test")
    results = {"final": run_test(cfg, model, device, distributed, data, checkpoint, loaders=loaders)}
    best_path = os.path.join(cfg.OUTPUT_DIR, BEST)
    if not os.path.isfile(best_path):
        return results
    best_checkpoint = read_checkpoint(best_path)
    load_model_weights(unwrap(model), model_state_from(best_checkpoint, best_path), best_path)
    info = best_checkpoint.get("best", {})
    logger.info("testing the best model: epoch %s, %s %.2f on %s", info.get("epoch", "?"), info.get("metric", "?"),
                info.get("value", float("nan")), info.get("dataset", "?"))
    results["best"] = run_test(cfg, model, device, distributed, data, best_path, loaders=loaders)
    if comm.is_main_process():
        metric = cfg.TEST.BEST_METRIC
        for name in (n for n in results["final"] if metric in results["final"][n]):  # not a split without labels
            logger.info("%s on %s: final model %.2f, best model (epoch %s) %.2f", metric, name,
                        results["final"][name].get(metric, float("nan")), info.get("epoch", "?"),
                        results["best"][name].get(metric, float("nan")))
    return results
