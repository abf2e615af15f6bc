"""The periodic jobs around the training step, each a small named hook.

The loop (tan/engine/trainer.py) calls, for every hook in order:
``before_train(state)``; ``before_epoch(state, epoch)``; before every step
``before_step(state)`` and after it ``after_step(state, step)``; after
every epoch ``after_epoch(state, epoch)``; ``after_train(state)`` once the
last epoch is done; and ``close()`` however the loop ends. ``state`` is the
run's :class:`TrainingState`, already advanced past the step or epoch.
docs/training.md ("Hooks") is the contract a hook of a user's own relies on.
"""
import datetime
import math
import os
import time
from typing import NamedTuple, Optional

import torch

from ..errors import NonFiniteLossError, TanError, TrainingInterrupted
from ..utils import comm
from ..utils.checkpoint_file import BEST, FINAL, read_checkpoint
from ..utils.events import ScalarWriter
from ..utils.hooks import HookBase
from ..utils.logger import get_logger
from ..utils.metric_logger import MetricLogger
from .inference import inference, reported_metrics
from .wrappers import unwrap, weights_digest
from .preemption import PreemptionFlag

# Checkpointer.save() and save_weights() take names without ".pth".
FINAL_NAME, BEST_NAME = os.path.splitext(FINAL)[0], os.path.splitext(BEST)[0]


class LoopPlan(NamedTuple):
    """The loop's fixed numbers."""
    max_epoch: int
    iters_per_epoch: int
    log_period: int

    @classmethod
    def from_config(cls, cfg, data_loader):
        iters = len(data_loader)
        if cfg.SOLVER.ITERS_PER_EPOCH:
            iters = min(iters, cfg.SOLVER.ITERS_PER_EPOCH)
        return cls(cfg.SOLVER.MAX_EPOCH, iters, cfg.SOLVER.LOG_PERIOD)

    def check_resume(self, state):
        """A run resumed mid-epoch must still have batches of that epoch left."""
        if state.iter_in_epoch >= self.iters_per_epoch:
            raise TanError(f"the checkpoint stopped after iteration {state.iter_in_epoch} of epoch {state.epoch}, "
                           f"but an epoch now has {self.iters_per_epoch} iterations (SOLVER.ITERS_PER_EPOCH, "
                           f"or a smaller dataset); resume with the settings the run started with")

    def is_sync_point(self, it):
        """Log iterations and the end of an epoch: where losses are read back and ranks agree on signals."""
        return it % self.log_period == 0 or it == self.iters_per_epoch


class Step(NamedTuple):
    """What the loop knows of the step just done (``it`` counts from 1 in the epoch)."""
    epoch: int
    it: int
    loss: torch.Tensor  # on the device, not yet read back
    data_time: float
    iter_time: float
    sync_point: bool
    terms: Optional[dict] = None  # the loss's named terms when it has several, on the device


# Beyond this an ETA says only that it is far off (a timedelta holds at most 999999999 days).
_LONGEST_ETA = 100 * 365 * 86400


def duration_text(seconds):
    """Seconds as H:MM:SS (with days), or "over 100 years" for a run that long."""
    if not seconds < _LONGEST_ETA:  # NaN included
        return "over 100 years"
    return str(datetime.timedelta(seconds=int(seconds)))


class TrainingLogger(HookBase):
    """Losses (read back and checked for NaN at sync points only), the log line
    with its ETA, OUTPUT_DIR/metrics.jsonl and TensorBoard scalars."""

    def __init__(self, cfg, plan, optimizer, device, checkpointer, records):
        """``records``: the run's :class:`tan.engine.records.RunRecords` (metrics.jsonl)."""
        self.cfg, self.plan, self.optimizer, self.device, self.checkpointer = cfg, plan, optimizer, device, checkpointer
        self.records = records
        self.logger = get_logger("trainer")
        self.events = self.validation_events = None  # TensorBoard, opened once the run's position is known
        self.meters = MetricLogger(window_size=plan.log_period)
        self.pending = []  # (iteration, loss tensor, terms) since the last read-back: one sync for all
        self.term_names = []
        self.run_start = self.timer_start = time.perf_counter()
        self.timed_iters, self.warmed_up = 0, False

    def state_dict(self):
        """The loss meters: a resumed run logs the medians and averages the uninterrupted one logs (one
        process; with several, each rank resumes with rank 0's meters, and the logged mean over ranks of
        ``loss_avg`` is then near, not equal, to an uninterrupted run's)."""
        return {"meters": {name: meter for name, meter in self.meters.state_dict().items()
                           if name not in ("data_time", "iter_time")}}

    def load_state_dict(self, state):
        self.meters.load_state_dict(state.get("meters", {}))

    def before_train(self, state):
        # The scalars from the checkpoint resumed from on are written again by this run: TensorBoard
        # hides the old ones (training scalars are by iteration, validation ones by epoch).
        main = comm.is_main_process()
        self.events = ScalarWriter(self.cfg, main, purge_step=state.iteration + 1)
        self.validation_events = ScalarWriter(self.cfg, main, "val", purge_step=state.epoch_to_close or state.epoch)
        resuming = f" (resuming epoch {state.epoch} after iteration {state.iter_in_epoch})" if state.iter_in_epoch else ""
        self.logger.info("start training: epochs %d..%d, %d iterations per epoch%s", state.epoch, self.plan.max_epoch,
                         self.plan.iters_per_epoch, resuming)

    def after_step(self, state, step):
        self.pending.append((state.iteration, step.loss, step.terms or {}))
        self.meters.update(data_time=step.data_time, iter_time=step.iter_time)
        self.timed_iters += 1
        if not step.sync_point:
            return
        self.flush_losses(step.epoch)
        remaining = (self.plan.max_epoch - step.epoch + 1) * self.plan.iters_per_epoch - step.it
        per_iter = (time.perf_counter() - self.timer_start) / max(self.timed_iters, 1)
        record = self._log(step, state.iteration, remaining * per_iter)
        self.events.scalars({k: record[k] for k in ("loss", *self.term_names, "lr", "time", "data_time")},
                            state.iteration, "train/")
        if not self.warmed_up:  # keep warm-up (workers starting, first allocations) out of the ETA
            self.warmed_up, self.timed_iters, self.timer_start = True, 0, time.perf_counter()

    def flush_losses(self, epoch):
        """Read the pending losses back in one copy; a NaN or infinite one stops the run."""
        if not self.pending:
            return
        rows = torch.stack([torch.stack([loss.float(), *(t.float() for t in terms.values())])
                            for _, loss, terms in self.pending]).cpu().tolist()
        self.term_names = list(self.pending[-1][2])
        values = [row[0] for row in rows]
        for (iteration, _, _), value in zip(self.pending, values):
            if not math.isfinite(value):
                last = self.checkpointer.last_checkpoint()
                raise NonFiniteLossError(
                    f"loss is {value} at iteration {iteration} (epoch {epoch}); stopping without saving. "
                    f"The last good checkpoint is {last or 'none (no checkpoint was saved yet)'}, left as it was. "
                    f"Lower SOLVER.LR or check the inputs.")
        self.pending.clear()
        for row in rows:
            self.meters.update(loss=row[0], **dict(zip(self.term_names, row[1:])))

    def _log(self, step, iteration, eta_seconds):
        loss = comm.reduce_mean(self.meters["loss"].median)
        loss_avg = comm.reduce_mean(self.meters["loss"].global_avg)
        record = {"epoch": step.epoch, "iter": step.it, "iteration": iteration, "loss": loss, "loss_avg": loss_avg,
                  "lr": self.optimizer.param_groups[0]["lr"], "time": self.meters["iter_time"].avg,
                  "data_time": self.meters["data_time"].avg, "eta_seconds": eta_seconds}
        terms = {name: comm.reduce_mean(self.meters[name].median) for name in self.term_names}
        record.update(terms)
        memory = "".join(f"  {name}: {value:.4f}" for name, value in terms.items())
        if self.device.type == "cuda":
            record["max_mem_mb"] = torch.cuda.max_memory_allocated(self.device) / 2 ** 20
            memory += f"  max mem: {record['max_mem_mb']:.0f} MB"
        self.logger.info("eta: %s  epoch: %d  iter: %d/%d  loss: %.4f (%.4f)  lr: %.6f  time: %.4f  data: %.4f%s",
                         duration_text(eta_seconds), step.epoch, step.it, self.plan.iters_per_epoch,
                         loss, loss_avg, record["lr"], record["time"], record["data_time"], memory)
        self.write(record)
        return record

    def write(self, record):
        """Append a record to metrics.jsonl (rank 0)."""
        self.records.write(record)

    def record_validation(self, epoch, results):
        """Validation metrics {dataset: metrics} of an epoch, into metrics.jsonl and TensorBoard."""
        for name, values in results.items():
            self.write({"epoch": epoch, "dataset": name, **values})
            self.validation_events.scalars(values, epoch, f"val/{name}/")

    def after_train(self, state):
        total = time.perf_counter() - self.run_start
        self.logger.info("training finished in %s", duration_text(total))

    def close(self):
        for events in (self.events, self.validation_events):
            if events is not None:
                events.close()


class EpochCheckpointer(HookBase):
    """model_{epoch}e.pth every ``period`` epochs, at the end of the epoch before the other hooks'
    after_epoch (the validation among them), and model_final.pth at the end."""

    def __init__(self, checkpointer, period, fields=None):
        """``fields(state, epoch_hooks_done)``: the checkpoint's fields besides the weights, optimizer
        and scheduler (default: the state's own, :meth:`TrainingState.checkpoint_fields`)."""
        self.checkpointer, self.period = checkpointer, period
        self.fields = fields or (lambda state, epoch_hooks_done: state.checkpoint_fields(
            epoch_hooks_done=epoch_hooks_done))
        self.resumed_at = None

    def save(self, state, name=None, epoch_hooks_done=False):
        """Save the whole run (weights, optimizer, scheduler, state); returns the path."""
        name = name or state.checkpoint_name()
        self.checkpointer.save(name, **self.fields(state, epoch_hooks_done))
        return self._path(name)

    def _path(self, name):
        return os.path.join(self.checkpointer.save_dir, name + ".pth")

    def saved_at(self, epoch):
        return bool(self.period) and epoch % self.period == 0

    def save_for_stop(self, state):
        """The checkpoint a stopped run resumes from: a new one mid-epoch; at the end of an epoch,
        after its hooks ran, that epoch's (again, if its periodic save wrote it before them), which
        says so, so that the resumed run does not run them again."""
        return self.save(state, epoch_hooks_done=not state.iter_in_epoch)

    def before_train(self, state):
        self.resumed_at = state.iteration

    def after_epoch(self, state, epoch):
        # A resumed run closing the epoch it resumed at already has that epoch's checkpoint.
        if self.saved_at(epoch) and state.iteration != self.resumed_at:
            self.save(state)

    def after_train(self, state):
        self.save(state, FINAL_NAME, epoch_hooks_done=True)

    def final_path(self):
        return self._path(FINAL_NAME)


class BestModel:
    """model_best.pth: the weights of the epoch with the highest TEST.BEST_METRIC
    on the first validation dataset (ties keep the earlier epoch)."""

    def __init__(self, metric, checkpointer):
        self.metric, self.checkpointer = metric, checkpointer
        self.logger = get_logger("trainer")

    def recover(self, state):
        """After a resume the best so far is the checkpoint's: a validation after it (model_best.pth
        may hold its epoch) is done again, and saves again if it is the best. A checkpoint that
        holds no best (saved before bests were kept in it) takes model_best.pth's when that
        epoch's validation came before the checkpoint."""
        path = os.path.join(self.checkpointer.save_dir, BEST)
        if not os.path.isfile(path):
            return
        try:
            best = read_checkpoint(path).get("best")
        except Exception as e:  # noqa: BLE001 - an unreadable best file is replaced by the next best epoch
            self.logger.warning("cannot read %s (%s); it will be replaced by the next best epoch", path, e)
            state.best = None
            return
        if not best or best.get("metric") != self.metric:
            return
        first_undone = state.epoch_to_close or state.epoch  # the first epoch whose validation is to come
        if best.get("epoch", first_undone) >= first_undone:
            self.logger.info("%s holds epoch %s, validated after the checkpoint resumed from: that validation is "
                             "done again", path, best.get("epoch"))
        elif state.best is None:
            state.best = best

    def update(self, state, results, epoch):
        """Compare this epoch's ``results`` {dataset: metrics} with the best so far; save when better."""
        dataset = next(iter(results))
        if self.metric not in results[dataset]:  # a backstop: check_best_metric refuses this before training
            raise TanError(f"TEST.BEST_METRIC {self.metric!r} has no value on {dataset!r} at epoch {epoch}: "
                           f"it reports {', '.join(results[dataset])}")
        value = results[dataset][self.metric]
        best = state.best
        if best is not None and best.get("metric") == self.metric and value <= best["value"]:
            self.logger.info("best %s on %s so far: %.2f at epoch %d (this epoch: %.2f)", self.metric, dataset,
                             best["value"], best["epoch"], value)
            return
        state.best = {"metric": self.metric, "value": value, "epoch": epoch, "dataset": dataset}
        self.checkpointer.save_weights(BEST_NAME, epoch=epoch, best=state.best)
        self.logger.info("new best %s on %s: %.2f at epoch %d, saved as %s", self.metric, dataset, value, epoch, BEST)


def check_best_metric(cfg, loaders):
    """Refuse a TEST.BEST_METRIC that the first validation dataset never reports, before training
    (and before the run folder says it holds a run)."""
    if not loaders or not cfg.SOLVER.TEST_PERIOD:
        return
    first = loaders[0].dataset
    reported = reported_metrics(cfg.TEST.DETR_METRICS, first.by_query, cfg.TEST.EVALUATORS)
    if cfg.TEST.BEST_METRIC not in reported:
        raise TanError(f"TEST.BEST_METRIC {cfg.TEST.BEST_METRIC!r} is not reported on {first.name!r}, the first "
                       f"validation dataset (TEST.DETR_METRICS {cfg.TEST.DETR_METRICS!r}, TEST.EVALUATORS "
                       f"{list(cfg.TEST.EVALUATORS)}); it reports "
                       + (', '.join(reported) if reported else "nothing: its annotation file has no labels"))


class PeriodicEvaluator(HookBase):
    """Evaluate the validation loaders every TEST_PERIOD epochs and keep the best model."""

    def __init__(self, cfg, model, loaders, device, best_model, training_logger, windows=None):
        """``windows``: a tan.engine.long_videos.windowed_evaluation.WindowedEvaluation for the validation
        videos longer than the training ones, or None."""
        self.cfg, self.model, self.loaders, self.device = cfg, model, loaders or [], device
        self.windows = windows
        self.period, self.first_epoch = cfg.SOLVER.TEST_PERIOD, cfg.SOLVER.SKIP_TEST
        self.best_model, self.training_logger = best_model, training_logger
        # The last epoch's evaluations ({dataset: tan.engine.inference.Evaluation}) and a digest of the
        # weights they evaluated: the test after training writes from them instead of evaluating the
        # final model again, when it holds those weights (a later hook may have changed them).
        self.final_evaluations, self.final_digest = {}, None

    def before_train(self, state):
        self.best_model.recover(state)

    def after_epoch(self, state, epoch):
        if not (self.loaders and self.period and epoch % self.period == 0 and epoch >= self.first_epoch):
            return
        results = {}
        kept = {} if epoch == self.cfg.SOLVER.MAX_EPOCH else None
        for loader in self.loaders:  # every rank takes part; rank 0 gets the metrics
            name = loader.dataset.name
            metrics = inference(self.model, loader, name, self.cfg.TEST.NMS_THRESH, self.device,
                                amp=self.cfg.SOLVER.AMP, nms_units=self.cfg.TEST.NMS_UNITS,
                                detr=self.cfg.TEST.DETR_METRICS, windows=self.windows, evaluations=kept,
                                evaluators=self.cfg.TEST.EVALUATORS)
            if metrics is not None:
                results[name] = metrics
        comm.synchronize()
        self.model.train()
        if kept is not None:
            self.final_evaluations, self.final_digest = kept, weights_digest(unwrap(self.model))
        if results:
            self.training_logger.record_validation(epoch, results)
            self.best_model.update(state, results, epoch)


class StopOnSignal(HookBase):
    """SIGTERM / SIGINT: save a resumable checkpoint of the step or epoch just
    done and stop with TrainingInterrupted (the one stop path).

    A single process looks at the flag after every step; several processes
    agree on it (an all-reduce) only at sync points, where the loop waits anyway.
    The handlers are in place until model_final.pth is saved: a signal during
    the last epoch's evaluation or the final save stops the run right after
    that save, before the test (a stop there used to be lost and the test ran
    on). Then they are released, so a signal during the test ends the process
    as usual (every write is atomic; tan_apps/cli/signal_exits.py)."""

    def __init__(self, plan, checkpoints, flush_losses):
        self.plan, self.checkpoints, self.flush_losses = plan, checkpoints, flush_losses
        self.flag = PreemptionFlag()

    def before_train(self, state):
        # a resumed run that has epochs to train, or the last epoch's hooks to run again
        if state.epoch <= self.plan.max_epoch or state.epoch_to_close is not None:
            self.flag.__enter__()

    def after_step(self, state, step):
        if step.it < self.plan.iters_per_epoch and (step.sync_point or not comm.is_dist()):
            self._stop_if_asked(state, step.epoch, step.it)

    def after_epoch(self, state, epoch):
        if epoch < self.plan.max_epoch:
            self._stop_if_asked(state, epoch, self.plan.iters_per_epoch)

    def after_train(self, state):
        signum = self.flag.raised()
        self.close()
        if signum:
            raise TrainingInterrupted(signum, self.checkpoints.final_path(), state.epoch - 1, self.plan.iters_per_epoch)

    def _stop_if_asked(self, state, epoch, it):
        signum = self.flag.raised()
        if not signum:
            return
        self.flush_losses(epoch)  # never save after a NaN
        raise TrainingInterrupted(signum, self.checkpoints.save_for_stop(state), epoch, it)

    def close(self):
        self.flag.__exit__(None, None, None)
