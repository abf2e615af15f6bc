"""Run a model over test loaders, gather predictions and report metrics."""
import json
import os
import time

import torch

from ..utils import comm
from ..utils.io import atomic_write_text
from ..utils.logger import get_logger
from ..utils.progress import progress
from ..utils.signals import signals_held
from ..structures.moments import best_window_iou
from .evaluation import evaluate_moments, format_table, top_candidates
from .precision import autocast
from .step import forward_batch, move_batch
from .wrappers import unwrap


@torch.no_grad()
def compute_predictions(model, data_loader, device, nms_thresh, topk=5, amp="off", nms_units="seconds"):
    """Top moments of every query of this process's shard: {index: (moments, filled, scores)} on CPU.

    ``nms_units``: TEST.NMS_UNITS, what the NMS measures IoU on (docs/metric.md §2)."""
    was_training = model.training
    model.eval()
    core = unwrap(model)
    outputs = {}
    for batch in progress(data_loader, total=len(data_loader), desc="evaluating", unit="batch"):
        batch = move_batch(batch, device)
        with autocast(amp, device):
            output = forward_batch(model, batch)
        candidates = core.candidates(output, batch["durations"].to(device))  # one row per query
        kept = top_candidates(candidates, nms_thresh, topk, units=nms_units)
        moments, kept_scores, filled = (t.cpu() for t in kept)  # one copy per batch
        for row, index in enumerate(batch["indices"].tolist()):
            outputs[index] = (moments[row], filled[row], kept_scores[row])
    model.train(was_training)
    return outputs


def _gather(predictions):
    """Merge every rank's predictions on rank 0; the sampler's padding repeats indices and drops out."""
    merged = {}
    for part in comm.all_gather(predictions):
        merged.update(part)
    return merged


def inference(model, data_loader, dataset_name, nms_thresh, device, output_folder=None, checkpoint=None, amp="off",
              nms_units="seconds"):
    """Evaluate one test loader (``nms_units``: TEST.NMS_UNITS). Returns the metrics dict on rank 0, None elsewhere."""
    logger = get_logger("inference")
    dataset = data_loader.dataset.by_query  # a loader of videos holds the queries' dataset
    logger.info("evaluating on %s (%d queries)", dataset_name, len(dataset))
    start = time.perf_counter()
    predictions = _gather(compute_predictions(model, data_loader, device, nms_thresh, amp=amp, nms_units=nms_units))
    if not comm.is_main_process():
        return None
    order = sorted(predictions)
    if order != list(range(len(dataset))):
        raise RuntimeError(f"predictions cover {len(order)} of {len(dataset)} queries of {dataset_name}")
    kept = torch.stack([predictions[i][0] for i in order])
    filled = torch.stack([predictions[i][1] for i in order])
    gt = torch.from_numpy(dataset.windows)  # [Q, W, 2]: every ground-truth window
    results = evaluate_moments(kept, filled, gt)
    logger.info("%s: %d queries evaluated in %.1f s\n%s", dataset_name, len(order), time.perf_counter() - start,
                format_table(results, f"results on {dataset_name}:"))
    if output_folder:
        record = dict(results, checkpoint=checkpoint or "", num_queries=len(order))
        with signals_held():  # both files new, or both as they were
            atomic_write_text(os.path.join(output_folder, "metrics.json"), json.dumps(record, indent=2) + "\n")
            write_predictions(os.path.join(output_folder, "predictions.jsonl"), dataset, predictions, gt)
    return results


def write_predictions(path, dataset, predictions, gt):
    """One JSON line per query: video, sentence, duration, ground truth (``gt``, the first
    window; ``gt_windows`` too where a query has several), and the kept top moments
    (seconds) with their scores and IoU with the ground truth (its best window)."""
    lines = []
    for index in sorted(predictions):
        moments, filled, scores = predictions[index]
        moments, scores = moments[filled], scores[filled]
        ious = best_window_iou(moments, gt[index][None]) if len(moments) else torch.zeros(0)
        count = int(dataset.window_counts[index])
        several = {"gt_windows": [[round(float(x), 4) for x in w] for w in gt[index][:count]]} if count > 1 else {}
        lines.append(json.dumps({
            "index": index,
            "video": dataset.videos[dataset.video_ids[index]],
            "sentence": dataset.sentences[index],
            "duration": round(float(dataset.durations[index]), 4),
            "gt": [round(float(x), 4) for x in gt[index][0]],
            **several,
            "moments": [[round(float(a), 4), round(float(b), 4)] for a, b in moments.tolist()],
            "scores": [round(float(x), 6) for x in scores.tolist()],
            "ious": [round(float(x), 4) for x in ious.tolist()],
        }))
    atomic_write_text(path, "\n".join(lines) + "\n")
