"""The two things the tools do: train from a config, and test a model."""
import os
import warnings

import torch

from ..data import make_data_loader
from ..modeling import build_model
from ..solver import build_lr_scheduler, build_optimizer
from ..utils import comm
from ..utils.checkpoint import BEST, FINAL, Checkpointer, load_model_weights, model_state_from, read_checkpoint
from ..utils.logger import get_logger
from .inference import inference, unwrap
from .precision import make_grad_scaler, maybe_compile, prepare_model
from .trainer import do_train


def wrap_distributed(model, device, distributed):
    """DistributedDataParallel around the model when running under several processes."""
    if not distributed:
        return model
    ids = [device.index] if device.type == "cuda" else None
    with warnings.catch_warnings():  # newer torch deprecates the name; the behaviour is the one we want
        warnings.filterwarnings("ignore", message=".*broadcast_buffers.*", category=FutureWarning)
        # Masks and weight maps are derived buffers, identical on every rank: no need to broadcast them.
        return torch.nn.parallel.DistributedDataParallel(model, device_ids=ids, broadcast_buffers=False,
                                                         output_device=device.index if ids else None)


def train(cfg, device, distributed):
    """Build, resume or initialise, and train; returns (model, checkpoint name)."""
    logger = get_logger("train")
    model = prepare_model(cfg, build_model(cfg).to(device), device)
    final = os.path.join(cfg.OUTPUT_DIR, FINAL)
    if os.path.isfile(final):
        logger.info("%s exists: nothing to train", final)
        load_model_weights(model, model_state_from(read_checkpoint(final), final), final)
        return model, final
    optimizer = build_optimizer(cfg, model)
    scheduler = build_lr_scheduler(cfg, optimizer)
    grad_scaler = make_grad_scaler(cfg.SOLVER.AMP, device)
    checkpointer = Checkpointer(model, optimizer, scheduler, cfg.OUTPUT_DIR, comm.is_main_process(),
                                extra={"grad_scaler": grad_scaler})
    arguments = {"epoch": 1, "iteration": 0}
    arguments.update(checkpointer.load(cfg.MODEL.WEIGHT))
    model = maybe_compile(cfg, wrap_distributed(model, device, distributed))
    data_loader = make_data_loader(cfg, is_train=True, is_distributed=distributed)
    data_loader_val = None
    if cfg.SOLVER.TEST_PERIOD > 0:
        data_loader_val = make_data_loader(cfg, is_train=False, is_distributed=distributed, is_for_period=True)
        if not cfg.DATASETS.VAL:
            logger.warning("DATASETS.VAL is empty: periodic evaluation and model_best.pth use the test datasets, "
                           "so the best model's test figures are optimistic; report the final model's")
    do_train(cfg, model, data_loader, data_loader_val, optimizer, scheduler, checkpointer, device,
             cfg.SOLVER.CHECKPOINT_PERIOD, cfg.SOLVER.TEST_PERIOD, arguments, grad_scaler)
    return model, final


def run_test(cfg, model, device, distributed, checkpoint="", folder_name="inference"):
    """Evaluate on every dataset of DATASETS.TEST; results under OUTPUT_DIR/{folder_name}/{name}/."""
    results = {}
    for loader in make_data_loader(cfg, is_train=False, is_distributed=distributed):
        name = loader.dataset.name
        folder = os.path.join(cfg.OUTPUT_DIR, folder_name, name) if comm.is_main_process() else None
        results[name] = inference(model, loader, name, cfg.TEST.NMS_THRESH, device, folder, checkpoint,
                                  amp=cfg.SOLVER.AMP)
        comm.synchronize()
    return results


def test_final_and_best(cfg, model, device, distributed, checkpoint):
    """Test the final model, then model_best.pth when training kept one; logs both side by side."""
    logger = get_logger("test")
    results = {"final": run_test(cfg, model, device, distributed, checkpoint)}
    best_path = os.path.join(cfg.OUTPUT_DIR, BEST)
    if not os.path.isfile(best_path):
        return results
    best_checkpoint = read_checkpoint(best_path)
    load_model_weights(unwrap(model), model_state_from(best_checkpoint, best_path), best_path)
    info = best_checkpoint.get("best", {})
    logger.info("testing the best model: epoch %s, %s %.2f on %s", info.get("epoch", "?"), info.get("metric", "?"),
                info.get("value", float("nan")), info.get("dataset", "?"))
    results["best"] = run_test(cfg, model, device, distributed, best_path, folder_name="inference_best")
    if comm.is_main_process():
        metric = cfg.TEST.BEST_METRIC
        for name in results["final"]:
            logger.info("%s on %s: final model %.2f, best model (epoch %s) %.2f", metric, name,
                        results["final"][name][metric], info.get("epoch", "?"), results["best"][name][metric])
    return results