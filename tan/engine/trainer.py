"""The training loop: epochs of steps, with the periodic jobs as hooks around them.

Per step the loop fetches a batch and calls :func:`run_step` (forward, loss,
backward, update); per epoch it steps the learning-rate schedule. Everything
else is a hook (tan/engine/hooks.py), called in this order after each step
and each epoch: the epoch checkpoints, the logger (losses, NaN check, ETA,
metrics.jsonl, TensorBoard), the periodic evaluation with the best model,
the model's own hooks (``hooks(cfg)``), and the stop on SIGTERM / SIGINT. The run's position lives in one
:class:`TrainingState`, saved in every checkpoint, so a resumed run continues
at the same batch with the same random streams.
"""
import itertools
import time

from ..config.models import model_class
from ..utils.progress import progress
from .hooks import BestModel, EpochCheckpointer, LoopPlan, PeriodicEvaluator, Step, StopOnSignal, TrainingLogger
from .step import run_step
from .wrappers import unwrap


def default_hooks(cfg, model, plan, val_loaders, optimizer, checkpointer, device):
    """The hooks of a training run, in the order they are called: the built-in ones,
    then those the model asks for (``hooks(cfg)``), then the stop on a signal."""
    logger = TrainingLogger(cfg, plan, optimizer, device, checkpointer)
    checkpoints = EpochCheckpointer(checkpointer, cfg.SOLVER.CHECKPOINT_PERIOD)
    evaluator = PeriodicEvaluator(cfg, model, val_loaders, device, BestModel(cfg.TEST.BEST_METRIC, checkpointer),
                                  logger)
    return [checkpoints, logger, evaluator, *unwrap(model).hooks(cfg),
            StopOnSignal(plan, checkpoints, logger.flush_losses)]


def do_train(cfg, model, data_loader, val_loaders, optimizer, scheduler, checkpointer, device, state,
             grad_scaler=None):
    """Train from ``state`` (a fresh TrainingState, or the one of a checkpoint) to SOLVER.MAX_EPOCH."""
    plan = LoopPlan.from_config(cfg, data_loader)
    plan.check_resume(state)
    hooks = default_hooks(cfg, model, plan, val_loaders, optimizer, checkpointer, device)
    clip = model_class(cfg).recipe(cfg).clip_grad_norm
    model.train()
    state.restore_rng()
    try:
        for hook in hooks:
            hook.before_train(state)
        for epoch in range(state.epoch, plan.max_epoch + 1):
            data_loader.sampler.resume(epoch, state.iter_in_epoch)
            for hook in hooks:
                hook.before_epoch(state, epoch)
            batches = progress(data_loader, total=plan.iters_per_epoch, initial=state.iter_in_epoch,
                               desc=f"epoch {epoch}/{plan.max_epoch}")
            tick = time.perf_counter()
            for batch in itertools.islice(batches, plan.iters_per_epoch - state.iter_in_epoch):
                data_time = time.perf_counter() - tick
                loss, terms = run_step(model, batch, optimizer, grad_scaler, cfg.SOLVER.AMP, device, clip)
                state.step_done()
                step = Step(epoch, state.iter_in_epoch, loss, data_time, time.perf_counter() - tick,
                            plan.is_sync_point(state.iter_in_epoch), terms)
                for hook in hooks:
                    hook.after_step(state, step)
                tick = time.perf_counter()
            if hasattr(batches, "close"):  # a progress bar
                batches.close()
            scheduler.step()
            state.epoch_done()
            for hook in hooks:
                hook.after_epoch(state, epoch)
        for hook in hooks:
            hook.after_train(state)
    finally:
        for hook in reversed(hooks):  # the signal handlers are released first, whatever else fails
            hook.close()
    return model
