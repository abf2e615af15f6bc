"""The training loop: epochs of (fetch, forward, loss, backward, step), with
logging, checkpoints and periodic evaluation around it."""
import datetime
import json
import math
import os
import time

import torch

from ..utils import comm
from ..utils.checkpoint import BEST, read_checkpoint
from ..utils.events import ScalarWriter
from ..utils.progress import progress
from ..utils.logger import get_logger
from ..utils.metric_logger import MetricLogger
from ..utils.rng import capture_rng_state, restore_rng_state
from .inference import inference, unwrap
from .interrupt import InterruptFlag, TrainingInterrupted
from .precision import autocast


class NonFiniteLossError(FloatingPointError):
    """The loss became NaN or infinite; the run must stop without saving."""


def _append_jsonl(path, record):
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")


def _to_device(batch, device):
    return {k: (v.to(device, non_blocking=True) if k != "wordlens" else v) for k, v in batch.items()}


def do_train(cfg, model, data_loader, data_loader_val, optimizer, scheduler, checkpointer, device,
             checkpoint_period, test_period, arguments, grad_scaler=None):
    """Train from ``arguments["epoch"]`` (and, after an interruption, from batch
    ``arguments["iter_in_epoch"]`` of it) to SOLVER.MAX_EPOCH.

    Inside an iteration nothing waits for the device: losses are kept on it
    and read back (and checked for NaN) at log iterations, and distributed
    runs agree on a pending signal at those iterations too."""
    logger = get_logger("trainer")
    max_epoch = cfg.SOLVER.MAX_EPOCH
    log_period = cfg.SOLVER.LOG_PERIOD
    start_epoch = arguments["epoch"]
    skip = arguments.pop("iter_in_epoch", 0)  # batches of start_epoch already trained on
    if "rng" in arguments:
        restore_rng_state(arguments.pop("rng"))
    iters_per_epoch = len(data_loader)
    if cfg.SOLVER.ITERS_PER_EPOCH:
        iters_per_epoch = min(iters_per_epoch, cfg.SOLVER.ITERS_PER_EPOCH)
    metrics_path = None
    if comm.is_main_process():
        os.makedirs(cfg.OUTPUT_DIR, exist_ok=True)
        metrics_path = os.path.join(cfg.OUTPUT_DIR, "metrics.jsonl")
    loss_fn = unwrap(model).loss
    amp = cfg.SOLVER.AMP
    meters = MetricLogger(window_size=log_period)
    events = ScalarWriter(cfg, comm.is_main_process())
    _recover_best(cfg, arguments, logger)
    logger.info("start training: epochs %d..%d, %d iterations per epoch%s", start_epoch, max_epoch,
                iters_per_epoch, f" (resuming epoch {start_epoch} after iteration {skip})" if skip else "")

    def save(name):
        checkpointer.save(name, **arguments, rng=capture_rng_state())

    model.train()
    run_start = time.perf_counter()
    timed_iters, timer_start, warmed_up = 0, time.perf_counter(), False
    pending = []  # (iteration, loss tensor) since the last log: read back in one sync
    with InterruptFlag() as interrupt:
        for epoch in range(start_epoch, max_epoch + 1):
            first = skip if epoch == start_epoch else 0
            data_loader.sampler.set_epoch(epoch, start=first * data_loader.batch_size)
            tick = time.perf_counter()
            batches = progress(data_loader, total=iters_per_epoch, initial=first, desc=f"epoch {epoch}/{max_epoch}")
            for it, batch in enumerate(batches, first + 1):
                data_time = time.perf_counter() - tick
                batch = _to_device(batch, device)
                with autocast(amp, device):
                    logits = model(batch["feats"], batch["queries"], batch["wordlens"])  # [B, N, N]
                loss = loss_fn(logits, batch["moments"], batch["durations"])  # float32
                optimizer.zero_grad(set_to_none=True)
                if grad_scaler is not None and grad_scaler.is_enabled():
                    grad_scaler.scale(loss).backward()
                    grad_scaler.step(optimizer)
                    grad_scaler.update()
                else:
                    loss.backward()
                    optimizer.step()
                arguments["iteration"] = arguments.get("iteration", 0) + 1
                pending.append((arguments["iteration"], loss.detach()))
                meters.update(data_time=data_time, iter_time=time.perf_counter() - tick)
                timed_iters += 1
                log_now = it % log_period == 0 or it == iters_per_epoch
                if log_now:
                    _flush_losses(pending, meters, epoch, checkpointer)
                    remaining = (max_epoch - epoch + 1) * iters_per_epoch - it
                    per_iter = (time.perf_counter() - timer_start) / max(timed_iters, 1)
                    record = _log(logger, metrics_path, meters, optimizer, device, epoch, it, iters_per_epoch,
                                  arguments["iteration"], remaining * per_iter)
                    events.scalars({k: record[k] for k in ("loss", "lr", "time", "data_time")},
                                   arguments["iteration"], "train/")
                    if not warmed_up:  # keep warm-up (workers starting, first allocations) out of the ETA
                        warmed_up, timed_iters, timer_start = True, 0, time.perf_counter()
                # Single process: a flag read, every iteration. Several: an
                # all-reduce, so only where the loop syncs anyway.
                signum = interrupt.raised(device) if (log_now or not comm.is_dist()) else 0
                if signum and it < iters_per_epoch:
                    _flush_losses(pending, meters, epoch, checkpointer)
                    arguments["iter_in_epoch"] = it
                    name = f"model_{epoch}e_{it}it"
                    save(name)
                    raise TrainingInterrupted(signum, os.path.join(cfg.OUTPUT_DIR, name + ".pth"), epoch, it)
                tick = time.perf_counter()
                if it == iters_per_epoch:
                    break
            if hasattr(batches, "close"):
                batches.close()

            scheduler.step()
            arguments["epoch"] = epoch + 1
            arguments.pop("iter_in_epoch", None)
            if checkpoint_period and epoch % checkpoint_period == 0:
                save(f"model_{epoch}e")
            if data_loader_val and test_period and epoch % test_period == 0:
                results = _evaluate_period(cfg, model, data_loader_val, device, epoch, metrics_path)
                model.train()
                if results:
                    for name, values in results.items():
                        events.scalars(values, epoch, f"val/{name}/")
                    _update_best(cfg, results, epoch, arguments, checkpointer, logger)
            signum = interrupt.raised(device)
            if signum and epoch < max_epoch:
                if not (checkpoint_period and epoch % checkpoint_period == 0):
                    save(f"model_{epoch}e")
                raise TrainingInterrupted(signum, checkpointer.last_checkpoint(), epoch, iters_per_epoch)
    save("model_final")
    events.close()
    total = time.perf_counter() - run_start
    logger.info("training finished in %s", datetime.timedelta(seconds=int(total)))
    return model


def _flush_losses(pending, meters, epoch, checkpointer):
    if not pending:
        return
    values = torch.stack([loss for _, loss in pending]).float().cpu().tolist()
    for (iteration, _), value in zip(pending, values):
        if not math.isfinite(value):
            last = checkpointer.last_checkpoint()
            raise NonFiniteLossError(
                f"loss is {value} at iteration {iteration} (epoch {epoch}); stopping without saving. "
                f"The last good checkpoint is {last or 'none (no checkpoint was saved yet)'}, left as it was. "
                f"Lower SOLVER.LR or check the inputs.")
    pending.clear()
    for value in values:
        meters.update(loss=value)


def _log(logger, metrics_path, meters, optimizer, device, epoch, it, iters_per_epoch, iteration, eta_seconds):
    loss = comm.reduce_mean(meters["loss"].median)
    loss_avg = comm.reduce_mean(meters["loss"].global_avg)
    record = {
        "epoch": epoch, "iter": it, "iteration": iteration,
        "loss": loss, "loss_avg": loss_avg,
        "lr": optimizer.param_groups[0]["lr"],
        "time": meters["iter_time"].avg, "data_time": meters["data_time"].avg,
        "eta_seconds": eta_seconds,
    }
    memory = ""
    if device.type == "cuda":
        record["max_mem_mb"] = torch.cuda.max_memory_allocated(device) / 2 ** 20
        memory = f"  max mem: {record['max_mem_mb']:.0f} MB"
    logger.info("eta: %s  epoch: %d  iter: %d/%d  loss: %.4f (%.4f)  lr: %.6f  time: %.4f  data: %.4f%s",
                datetime.timedelta(seconds=int(eta_seconds)), epoch, it, iters_per_epoch, loss, loss_avg,
                record["lr"], record["time"], record["data_time"], memory)
    if metrics_path:
        _append_jsonl(metrics_path, record)
    return record


def _evaluate_period(cfg, model, loaders, device, epoch, metrics_path):
    """{dataset: metrics} on rank 0 (in loader order), None on the others."""
    all_results = {}
    for loader in loaders:
        name = loader.dataset.name
        results = inference(model, loader, name, cfg.TEST.NMS_THRESH, device, amp=cfg.SOLVER.AMP)
        if results is not None:
            all_results[name] = results
            if metrics_path:
                _append_jsonl(metrics_path, {"epoch": epoch, "dataset": name, **results})
    comm.synchronize()
    return all_results or None


def _recover_best(cfg, arguments, logger):
    """After a resume, the best so far is what model_best.pth says (it may be newer
    than the checkpoint resumed from, which was saved before that evaluation)."""
    path = os.path.join(cfg.OUTPUT_DIR, BEST)
    if not os.path.isfile(path):
        return
    try:
        best = read_checkpoint(path).get("best")
    except Exception as e:  # noqa: BLE001 - an unreadable best file is replaced by the next best epoch
        logger.warning("cannot read %s (%s); it will be replaced by the next best epoch", path, e)
        arguments.pop("best", None)
        return
    if best and best.get("metric") == cfg.TEST.BEST_METRIC:
        arguments["best"] = best


def _update_best(cfg, results, epoch, arguments, checkpointer, logger):
    """Keep model_best.pth at the epoch with the highest TEST.BEST_METRIC on the
    first validation dataset (ties keep the earlier epoch)."""
    metric = cfg.TEST.BEST_METRIC
    dataset = next(iter(results))
    value = results[dataset][metric]
    best = arguments.get("best")
    if best is not None and best.get("metric") == metric and value <= best["value"]:
        logger.info("best %s on %s so far: %.2f at epoch %d (this epoch: %.2f)", metric, dataset, best["value"],
                    best["epoch"], value)
        return
    arguments["best"] = {"metric": metric, "value": value, "epoch": epoch, "dataset": dataset}
    checkpointer.save_weights(BEST[:-4], epoch=epoch, best=arguments["best"])
    logger.info("new best %s on %s: %.2f at epoch %d, saved as %s", metric, dataset, value, epoch, BEST)
