"""Run a model over a test loader, gather its predictions and hand them to the dataset's evaluators
(tan.evaluation): one loop for every dataset, whatever its format."""
import json
import os
import time
from typing import Callable, NamedTuple

import torch

from ..data.loaders import loader_without
from ..evaluation import Prediction, build_evaluators, clip_saliency, format_table, top_candidates
from ..evaluation.detr_metrics import CLIP_SECONDS
from ..evaluation.predictions import write_predictions
from ..utils import comm
from ..utils.held_signals import signals_held
from ..utils.io import atomic_write_text
from ..utils.logger import get_logger
from ..utils.progress import progress
from .precision import autocast
from .step import forward_batch, move_batch
from .wrappers import unwrap


@torch.no_grad()
def compute_predictions(model, data_loader, device, nms_thresh, topk=5, amp="off", nms_units="seconds",
                        saliency=False):
    """Top moments of every query of this process's shard: {index: tan.evaluation.Prediction} on CPU,
    with each 2-second clip's score (:func:`clip_saliency`) when ``saliency``, else None.

    ``nms_units``: TEST.NMS_UNITS, what the NMS measures IoU on (docs/metric.md §2)."""
    was_training = model.training
    model.eval()
    core = unwrap(model)
    outputs = {}
    for batch in progress(data_loader, total=len(data_loader), desc="evaluating", unit="batch"):
        batch = move_batch(batch, device)
        with autocast(amp, device):
            output = forward_batch(model, batch)
        durations = batch["durations"].to(device)
        candidates = core.candidates(output, durations)  # one row per query
        kept = top_candidates(candidates, nms_thresh, topk, units=nms_units)
        moments, kept_scores, filled = (t.cpu() for t in kept)  # one copy per batch
        clips = clip_saliency(candidates, durations, CLIP_SECONDS).cpu() if saliency else None
        counts = torch.ceil(durations / CLIP_SECONDS).long().clamp(min=1).tolist() if saliency else None
        for row, index in enumerate(batch["indices"].tolist()):
            outputs[index] = Prediction(moments[row], filled[row], kept_scores[row],
                                        clips[row, :counts[row]] if saliency else None)
    model.train(was_training)
    return outputs


def _gather(predictions):
    """Merge every rank's predictions on rank 0; the sampler's padding repeats indices and drops out."""
    merged = {}
    for part in comm.all_gather(predictions):
        merged.update(part)
    return merged


def reported_metrics(mode, dataset, extra=()):
    """The names of the figures :func:`inference` reports on ``dataset`` with TEST.DETR_METRICS ``mode``
    and TEST.EVALUATORS ``extra``: those of each of its evaluators (tan.evaluation.build_evaluators)."""
    return [name for evaluator in build_evaluators(dataset, dataset.name, mode, extra) for name in evaluator.reported()]


class Evaluation(NamedTuple):
    """One evaluation of a model's weights on a dataset, on rank 0: its metrics and how to write its
    files (``write(output folder, checkpoint path)``) for any checkpoint holding those weights."""
    results: dict
    write: Callable[[str, str], None]


def inference(model, data_loader, dataset_name, nms_thresh, device, output_folder=None, checkpoint=None, amp="off",
              nms_units="seconds", detr="off", windows=None, evaluations=None, evaluators=()):
    """Evaluate one test loader (``nms_units``: TEST.NMS_UNITS; ``detr``: TEST.DETR_METRICS, Moment-DETR's
    metrics besides ours; ``evaluators``: TEST.EVALUATORS, more evaluators by name; ``windows``: a
    tan.engine.long_videos.windowed_evaluation.WindowedEvaluation, which grounds the queries of the videos it
    selects by windows, or None). Returns the metrics dict on rank 0 ({} for a split without labels),
    None elsewhere. ``evaluations``: a dict that gets {dataset_name: :class:`Evaluation`} (None on
    other ranks), to write this evaluation's files again under another checkpoint's name."""
    logger = get_logger("inference")
    dataset = data_loader.dataset.by_query  # a loader of videos holds the queries' dataset
    chosen_evaluators = build_evaluators(dataset, dataset_name, detr, evaluators)
    saliency = any(e.wants_saliency() for e in chosen_evaluators)
    logger.info("evaluating on %s (%d queries)", dataset_name, len(dataset))
    start = time.perf_counter()
    topk = max(e.predicted_per_query() for e in chosen_evaluators)
    chosen = windows.long_videos(dataset) if windows is not None else {}
    # the queries grounded by windows skip the whole-video pass, but for the clip saliency of highlights
    whole = data_loader if saliency or not chosen else loader_without(
        data_loader, [q for queries in chosen.values() for q in queries])
    predictions = _gather(compute_predictions(model, whole, device, nms_thresh, amp=amp, nms_units=nms_units,
                                              topk=topk, saliency=saliency)) if whole is not None else {}
    windowed = _windowed(model, dataset, dataset_name, windows, chosen, device, topk, predictions)
    if not comm.is_main_process():
        if evaluations is not None:
            evaluations[dataset_name] = None
        return None
    if sorted(predictions) != list(range(len(dataset))):
        raise RuntimeError(f"predictions cover {len(predictions)} of {len(dataset)} queries of {dataset_name}")
    for evaluator in chosen_evaluators:
        evaluator.reset()
        evaluator.process(predictions)
    results = _evaluate(chosen_evaluators, dataset) if dataset.labeled else {}
    if dataset.labeled:
        logger.info("%s: %d queries evaluated in %.1f s\n%s", dataset_name, len(dataset), time.perf_counter() - start,
                    format_table(results, f"results on {dataset_name}:"))

    def write(folder, weights):
        record = _record(dataset, results, weights, windowed, chosen_evaluators)
        _write_results(folder, record, dataset, predictions, chosen_evaluators)

    if output_folder:
        write(output_folder, checkpoint)
    if evaluations is not None:
        evaluations[dataset_name] = Evaluation(results, write)
    if not dataset.labeled:
        files = [e.submission_name() for e in chosen_evaluators if e.submission_name()]
        logger.info("%s has no labels (%d queries): no metric; %s", dataset_name, len(predictions),
                    f"predictions and {' and '.join(files) or 'no submission file'} written to {output_folder}"
                    if output_folder else "nothing written")
    return results


def _evaluate(evaluators, dataset):
    """Every evaluator's figures, in the evaluators' order; a figure two of them give is refused."""
    results = {}
    for evaluator in evaluators:
        figures = evaluator.evaluate()
        twice = sorted(set(figures) & set(results))
        if twice:
            raise RuntimeError(f"{dataset.name}: evaluator {evaluator.NAME!r} reports {', '.join(twice)}, which an "
                               f"evaluator before it reported")
        results.update(figures)
    return results


def _record(dataset, results, checkpoint, windowed, evaluators):
    """What metrics.json holds: the figures, the checkpoint, how many queries, what was grounded by
    windows, and each evaluator's own entries; for a split without labels a note instead of figures."""
    if dataset.labeled:
        record = dict(results, checkpoint=checkpoint or "", num_queries=len(dataset))
    else:
        record = {"labeled": False, "checkpoint": checkpoint or "", "num_queries": len(dataset),
                  "note": "the annotation file has no labels: no metric; predictions and submission file only"}
    if windowed:
        record["windows"] = windowed
    for evaluator in evaluators if dataset.labeled else ():
        record.update(evaluator.record())
    return record


def _windowed(model, dataset, dataset_name, windows, chosen, device, topk, predictions):
    """Ground the queries of the ``chosen`` videos (``windows.long_videos``) by windows, into
    ``predictions`` (every rank holds the gathered ones; where the whole-video pass ran for them, for
    highlights' clip saliency, their moments are replaced and the saliency kept). Returns what was
    windowed (for metrics.json), or None when nothing was."""
    if not chosen:
        return None
    was_training = model.training
    model.eval()
    found = _gather(windows.predict(model, dataset, chosen, device, topk))
    model.train(was_training)
    for index, (moments, filled, scores, _) in found.items():
        earlier = predictions.get(index)
        predictions[index] = Prediction(moments, filled, scores, earlier.saliency if earlier is not None else None)
    described = windows.describe(chosen)
    get_logger("inference").info("%s: %d queries of %d videos longer than %.4g s grounded by windows of %.4g s "
                                 "every %.4g s", dataset_name, described["queries"], described["videos"],
                                 described["longer_than"], described["length"], described["stride"])
    return described


def _write_results(output_folder, record, dataset, predictions, evaluators):
    """metrics.json (``record``), predictions.jsonl and each evaluator's own files (a submission file):
    every file new, or every one as it was."""
    gt = torch.from_numpy(dataset.gt_moments) if dataset.labeled else None  # [Q, W, 2]: every ground-truth window
    with signals_held():
        atomic_write_text(os.path.join(output_folder, "metrics.json"), json.dumps(record, indent=2) + "\n")
        write_predictions(os.path.join(output_folder, "predictions.jsonl"), dataset, predictions, gt)
        for evaluator in evaluators:
            evaluator.write(output_folder)
