"""The two things the tools do: train from a config, and test a model."""
import os

from ..config.models import model_class
from ..config.history import HISTORY_FILE, change_record, commit_config, start_record, withdraw_config
from ..errors import TanError
from ..modeling import build_model
from ..solver import SCHEDULE_KEYS, apply_schedule, build_lr_scheduler, build_optimizer
from ..utils import comm
from ..utils.checkpoint import (BEST, FINAL, Checkpointer, checkpoint_name, last_checkpoint_file, load_model_weights,
                                model_state_from, read_checkpoint, run_info)
from ..utils.logger import get_logger
from .hooks import FINAL_NAME, LoopPlan, check_best_metric
from .inference import inference
from .precision import make_grad_scaler
from .state import TrainingState
from .trainer import do_train
from .wrappers import maybe_compile, prepare_model, unwrap, wrap_distributed


def train(cfg, device, distributed, data, config_changes=(), new_folder=False):
    """Build, resume or initialise, and train; returns (model, path of the final checkpoint).

    ``data`` is the run's :class:`tan.data.RunData`: its loaders are built once
    and shared with the test that follows. ``config_changes``: the accepted
    differences from OUTPUT_DIR/config.yml (rank 0; tan/cli/run_folder.py),
    applied and recorded once the checkpoint is restored, so that a change
    the checkpoint cannot take (another model shape) leaves config.yml as it was.
    ``new_folder``: OUTPUT_DIR has no config.yml yet; it is written only once
    everything training could fail on at its start (the datasets, the word
    vectors, resuming) is behind, so a run that never started leaves none."""
    logger = get_logger("train")
    model = prepare_model(cfg, build_model(cfg).to(device))
    final = os.path.join(cfg.OUTPUT_DIR, FINAL)
    if os.path.isfile(final) and last_checkpoint_file(cfg.OUTPUT_DIR) == (None, None):  # a final model from elsewhere
        logger.info("%s exists: nothing to train", final)
        load_model_weights(model, model_state_from(read_checkpoint(final), final), final)
        _record_config(cfg, new_folder, config_changes, TrainingState())
        return model, final
    optimizer = build_optimizer(cfg, model)
    scheduler = build_lr_scheduler(cfg, optimizer)
    grad_scaler = make_grad_scaler(cfg.SOLVER.AMP, device)
    checkpointer = Checkpointer(model, optimizer, scheduler, cfg.OUTPUT_DIR, comm.is_main_process(),
                                extra={"grad_scaler": grad_scaler}, info=run_info(cfg, data.extractors()))
    resumed = checkpointer.load(cfg.MODEL.WEIGHT)
    state = TrainingState.from_checkpoint(resumed)
    _check_epochs(cfg, state)
    _apply_schedule_changes(cfg, config_changes, state, optimizer, scheduler)
    if os.path.isfile(final) and state.epoch > cfg.SOLVER.MAX_EPOCH:
        _record_config(cfg, new_folder, config_changes, state)
        if os.path.abspath(final) in map(os.path.abspath, checkpointer.unreadable):
            # model_final.pth could not be read and the run resumed from its last epoch's
            # checkpoint, which holds the same state: write the final model again from it.
            checkpointer.save(FINAL_NAME, **resumed)
            logger.warning("%s could not be read; written again from %s, which holds all %d epochs", final,
                           checkpointer.loaded, cfg.SOLVER.MAX_EPOCH)
        else:
            logger.info("%s exists and holds all %d epochs: nothing to train", final, cfg.SOLVER.MAX_EPOCH)
        return model, final
    model = maybe_compile(cfg, wrap_distributed(model, device, distributed))
    by_video = model_class(cfg).batches_by_video(cfg)  # videos with their sentences, or queries
    train_loader = data.train_loader(distributed, by_video)
    val_loaders = data.val_loaders(distributed, by_video) if cfg.SOLVER.TEST_PERIOD > 0 else None
    LoopPlan.from_config(cfg, train_loader).check_resume(state)
    check_best_metric(cfg, val_loaders)
    # Only now, with everything the new config could fail on behind us, does the folder say it holds.
    _record_config(cfg, new_folder, config_changes, state)
    try:
        do_train(cfg, model, train_loader, val_loaders, optimizer, scheduler, checkpointer, device, state, grad_scaler)
    except BaseException:
        if new_folder and comm.is_main_process() and not checkpointer.last_checkpoint():
            withdraw_config(cfg.OUTPUT_DIR)  # stopped before its first checkpoint: the folder holds no run yet
        raise
    return model, final


def _check_epochs(cfg, state):
    """SOLVER.MAX_EPOCH may not end a run before what it has trained (a finished or a begun epoch)."""
    begun = state.epoch - 1 + (1 if state.iter_in_epoch else 0)
    if begun > cfg.SOLVER.MAX_EPOCH:
        trained = f"{state.epoch - 1} epochs" + (f" and {state.iter_in_epoch} steps of epoch {state.epoch}"
                                                 if state.iter_in_epoch else "")
        raise TanError(f"the run in {cfg.OUTPUT_DIR} has trained {trained}; SOLVER.MAX_EPOCH {cfg.SOLVER.MAX_EPOCH} "
                       f"cannot undo that (nothing was changed); use another OUTPUT_DIR")


def _apply_schedule_changes(cfg, changes, state, optimizer, scheduler):
    """A resumed run with an accepted new SOLVER.LR or SOLVER.MILESTONES (rank 0
    knows the changes; every rank applies them)."""
    resumed = state.iteration > 0
    if comm.reduce_max_int(resumed and any(c.key in SCHEDULE_KEYS for c in changes)):
        lr = apply_schedule(cfg, optimizer, scheduler)
        get_logger("train").info("learning rate from now on: %g (SOLVER.LR %g, milestones %s)", lr, cfg.SOLVER.LR,
                                 list(cfg.SOLVER.MILESTONES))


def _record_config(cfg, new_folder, changes, state):
    """config.yml becomes the config the next step trains with; the history says from where
    (its first line for a new folder)."""
    if not comm.is_main_process():
        return
    if new_folder:
        get_logger("train").info("saved the merged config to %s", commit_config(cfg, start_record(cfg, state.epoch)))
        return
    if not changes:
        return
    reason = "runtime settings" if all(not c.affects_results for c in changes) else "accepted"
    commit_config(cfg, change_record(changes, state.epoch, state.iter_in_epoch, reason))
    get_logger("train").info("config.yml updated; the change is recorded in %s from epoch %d", HISTORY_FILE,
                             state.epoch)


def results_folder(output_dir, checkpoint):
    """Where the test results of ``checkpoint`` go: OUTPUT_DIR/inference/{checkpoint name}/
    ("untrained" without a checkpoint), one sub-folder per dataset."""
    return os.path.join(output_dir, "inference", checkpoint_name(checkpoint) if checkpoint else "untrained")


def run_test(cfg, model, device, distributed, data, checkpoint="", folder=None):
    """Evaluate on every dataset of DATASETS.TEST; results under ``folder``/{name}/
    (default :func:`results_folder` of OUTPUT_DIR and ``checkpoint``)."""
    folder = folder or results_folder(cfg.OUTPUT_DIR, checkpoint)
    results = {}
    for loader in data.test_loaders(distributed, model_class(cfg).batches_by_video(cfg)):
        name = loader.dataset.name
        output = os.path.join(folder, name) if comm.is_main_process() else None
        results[name] = inference(model, loader, name, cfg.TEST.NMS_THRESH, device, output, checkpoint,
                                  amp=cfg.SOLVER.AMP, nms_units=cfg.TEST.NMS_UNITS, detr=cfg.TEST.DETR_METRICS)
        comm.synchronize()
    return results


def test_final_and_best(cfg, model, device, distributed, data, checkpoint):
    """Test the final model, then model_best.pth when training kept one; logs both side by side."""
    logger = get_logger("test")
    results = {"final": run_test(cfg, model, device, distributed, data, checkpoint)}
    best_path = os.path.join(cfg.OUTPUT_DIR, BEST)
    if not os.path.isfile(best_path):
        return results
    best_checkpoint = read_checkpoint(best_path)
    load_model_weights(unwrap(model), model_state_from(best_checkpoint, best_path), best_path)
    info = best_checkpoint.get("best", {})
    logger.info("testing the best model: epoch %s, %s %.2f on %s", info.get("epoch", "?"), info.get("metric", "?"),
                info.get("value", float("nan")), info.get("dataset", "?"))
    results["best"] = run_test(cfg, model, device, distributed, data, best_path)
    if comm.is_main_process():
        metric = cfg.TEST.BEST_METRIC
        for name in (n for n in results["final"] if metric in results["final"][n]):  # not a split without labels
            logger.info("%s on %s: final model %.2f, best model (epoch %s) %.2f", metric, name,
                        results["final"][name].get(metric, float("nan")), info.get("epoch", "?"),
                        results["best"][name].get(metric, float("nan")))
    return results
