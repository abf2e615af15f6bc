"""predictions.jsonl: every query's kept moments, written by every test (docs/metric.md §5)."""
import json

import torch

from ..structures.moments import best_moment_iou
from ..utils.io import atomic_write_text


def write_predictions(path, dataset, predictions, gt=None):
    """One JSON line per query: video, sentence, duration, ground truth (``gt``, the first
    window; ``gt_windows`` too where a query has several), and the kept top moments
    (seconds) with their scores and IoU with the ground truth (its best window). Without
    ``gt`` (a split without labels) the lines have no ground truth and no IoU."""
    lines = []
    for index in sorted(predictions):
        moments, scores = predictions[index].kept()
        record = {"index": index, "video": dataset.videos[dataset.video_ids[index]],
                  "sentence": dataset.sentences[index], "duration": round(float(dataset.durations[index]), 4)}
        if gt is not None:
            count = int(dataset.moment_counts[index])
            record["gt"] = [round(float(x), 4) for x in gt[index][0]]
            if count > 1:
                record["gt_windows"] = [[round(float(x), 4) for x in w] for w in gt[index][:count]]
        record["moments"] = [[round(float(a), 4), round(float(b), 4)] for a, b in moments.tolist()]
        record["scores"] = [round(float(x), 6) for x in scores.tolist()]
        if gt is not None:
            ious = best_moment_iou(moments, gt[index][None]) if len(moments) else torch.zeros(0)
            record["ious"] = [round(float(x), 4) for x in ious.tolist()]
        lines.append(json.dumps(record))
    atomic_write_text(path, "\n".join(lines) + "\n")
