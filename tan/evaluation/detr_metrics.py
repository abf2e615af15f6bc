"""Moment-DETR's metrics, with its ``standalone_eval``'s arithmetic (docs/metric.md §6).

The DETR half of the field (Moment-DETR, QD-DETR, CG-DETR, lighthouse) reports
moment retrieval as R1@t, mAP@t and their average over 0.5:0.05:0.95, by
moment length too, and highlight detection (QVHighlights) as HL-mAP and
HL-Hit1 at three saliency levels. What differs from our R@k,IoU@m (§2, §3):

* R1@t counts IoU >= t (ours: > t), for the first window listed, against
  the ground-truth window it overlaps most;
* mAP keeps the first MAX_WINDOWS windows listed, orders them by score
  (a stable sort: equal scores keep their listed order), matches each in turn
  to the unmatched ground-truth window of highest IoU (equal IoUs: the later
  window), and takes VOC's all-point interpolated precision; a query
  without any predicted window is left out of mAP, not counted as 0;
* length buckets keep, per query, the ground-truth windows of that length
  (short (0, 10] s, middle (10, 30], long (30, inf): standalone_eval's long
  ends at 150 s, the longest QVHighlights video, so on QVHighlights the two
  agree) and the queries that have one;
* values are percent rounded to two decimals, as standalone_eval prints them.

Here everything is numpy on plain arrays; the caller lays out the predictions.
"""
import numpy as np


# The figures, in report order; the HL ones only on datasets with saliency labels.
DETR_METRIC_NAMES = ("MR-full-R1@0.5", "MR-full-R1@0.7", "MR-full-mAP", "MR-full-mAP@0.5", "MR-full-mAP@0.75",
                     "MR-short-mAP", "MR-middle-mAP", "MR-long-mAP")
HIGHLIGHT_METRIC_NAMES = tuple(f"HL-min-{level}-{what}" for level in ("Fair", "Good", "VeryGood")
                               for what in ("mAP", "Hit1"))
MAP_THRESHOLDS = tuple(round(0.5 + 0.05 * i, 2) for i in range(10))
R1_REPORTED = (0.5, 0.7)
MAP_REPORTED = (0.5, 0.75)
MAX_WINDOWS = 10
LENGTH_RANGES = {"full": None, "short": (0.0, 10.0), "middle": (10.0, 30.0), "long": (30.0, float("inf"))}
# QVHighlights: saliency per 2-second clip, three annotators, 0..4; a clip is positive at or above these
CLIP_SECONDS = 2.0
SALIENCY_LEVELS = {"Fair": 2, "Good": 3, "VeryGood": 4}


def _percent(value):
    return float(f"{100.0 * value:.2f}")


def cross_iou(a, b):
    """IoU [N, M] of windows ``a`` [N, 2] and ``b`` [M, 2] (seconds); 0 where both are empty. The union is
    the two lengths less the intersection, in float64, as standalone_eval's AP computes it (not
    tan.structures.moments.temporal_iou, the hull in the model's dtype: equal values, other roundings)."""
    a, b = np.asarray(a, dtype=np.float64).reshape(-1, 2), np.asarray(b, dtype=np.float64).reshape(-1, 2)
    inter = np.clip(np.minimum(a[:, None, 1], b[None, :, 1]) - np.maximum(a[:, None, 0], b[None, :, 0]), 0, None)
    union = (a[:, 1] - a[:, 0])[:, None] + (b[:, 1] - b[:, 0])[None, :] - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


def first_window_iou(windows, gt):
    """IoU of the first listed window of ``windows`` [k, 2] with the ground-truth window (of ``gt``
    [W, 2]) it overlaps most; 0 when nothing is predicted."""
    if len(windows) == 0:
        return 0.0
    return float(cross_iou(windows[:1], gt)[0].max())


def average_precision(windows, scores, gt, thresholds=MAP_THRESHOLDS):
    """One query's AP at each of ``thresholds``: ``windows`` [k, 2] as listed with ``scores`` [k]
    (the first MAX_WINDOWS are used), ground truth ``gt`` [W, 2]. Returns an array [len(thresholds)]."""
    windows = np.asarray(windows, dtype=np.float64).reshape(-1, 2)[:MAX_WINDOWS]
    scores = np.asarray(scores, dtype=np.float64)[:MAX_WINDOWS]
    order = np.argsort(-scores, kind="stable")
    ious = cross_iou(windows[order], gt)  # [k, W]
    tp = np.zeros((len(thresholds), len(order)))
    for t, threshold in enumerate(thresholds):
        matched = np.zeros(len(gt), dtype=bool)
        for p in range(len(order)):
            # the best window first; of equal IoUs the later window, as a reversed stable argsort gives
            for g in np.argsort(ious[p], kind="stable")[::-1]:
                if ious[p, g] < threshold:
                    break
                if not matched[g]:
                    matched[g] = True
                    tp[t, p] = 1
                    break
    return np.array([_voc_ap(row, len(gt)) for row in tp])


def _voc_ap(hits, positives):
    """All-point interpolated AP of ranked ``hits`` (1 = true positive) with ``positives`` to find."""
    if len(hits) == 0:
        return 0.0
    found = np.cumsum(hits)
    precision = np.concatenate([[0.0], found / np.arange(1, len(hits) + 1), [0.0]])
    recall = np.concatenate([[0.0], found / positives, [1.0]])
    precision = np.maximum.accumulate(precision[::-1])[::-1]  # the best precision at this recall or more
    steps = np.flatnonzero(recall[1:] != recall[:-1]) + 1
    return float(np.sum((recall[steps] - recall[steps - 1]) * precision[steps]))


def buckets_with_queries(ground_truth):
    """The names of LENGTH_RANGES that some query's window (of ``ground_truth``: per query [W, 2]) falls in."""
    return [name for name, bounds in LENGTH_RANGES.items()
            if any(len(_in_range(np.asarray(gt, dtype=np.float64).reshape(-1, 2), bounds)) for gt in ground_truth)]


def _in_range(gt, bounds):
    if bounds is None:
        return gt
    lengths = gt[:, 1] - gt[:, 0]
    return gt[(lengths > bounds[0]) & (lengths <= bounds[1])]


def detr_metrics(predictions, ground_truth):
    """Moment retrieval as standalone_eval reports it. ``predictions``: per query (windows [k, 2],
    scores [k]) in listed order; ``ground_truth``: per query its windows [W, 2] (seconds).

    Returns {"MR-full-R1@0.5", "MR-full-R1@0.7", "MR-full-mAP", "MR-full-mAP@0.5", "MR-full-mAP@0.75",
    "MR-short-mAP", "MR-middle-mAP", "MR-long-mAP"} (percent; a bucket without queries is absent) and,
    under "MR-buckets", each bucket's R1, mAP per threshold and query count."""
    if len(predictions) != len(ground_truth):
        raise ValueError(f"{len(predictions)} predictions for {len(ground_truth)} queries")
    results, buckets = {}, {}
    for name, bounds in LENGTH_RANGES.items():
        r1, aps = [], []
        for (windows, scores), gt in zip(predictions, ground_truth):
            gt = _in_range(np.asarray(gt, dtype=np.float64).reshape(-1, 2), bounds)
            if len(gt) == 0:
                continue
            windows = np.asarray(windows, dtype=np.float64).reshape(-1, 2)
            r1.append(first_window_iou(windows, gt))
            if len(windows):
                aps.append(average_precision(windows, scores, gt))
        if not r1:
            continue
        r1 = np.asarray(r1)
        per_threshold = np.mean(aps, axis=0) if aps else np.zeros(len(MAP_THRESHOLDS))
        buckets[name] = {"queries": len(r1),
                         "R1": {str(t): _percent(np.mean(r1 >= t)) for t in MAP_THRESHOLDS},
                         "mAP": dict({str(t): _percent(v) for t, v in zip(MAP_THRESHOLDS, per_threshold)},
                                     average=_percent(np.mean(per_threshold)))}
        results[f"MR-{name}-mAP"] = buckets[name]["mAP"]["average"]
        if name == "full":
            results.update({f"MR-full-R1@{t}": buckets[name]["R1"][str(t)] for t in R1_REPORTED})
            results.update({f"MR-full-mAP@{t}": buckets[name]["mAP"][str(t)] for t in MAP_REPORTED})
    ordered = {k: results[k] for k in DETR_METRIC_NAMES if k in results}
    ordered["MR-buckets"] = buckets
    return ordered


def clip_saliency_ap(positive, scores):
    """AP of clip ``scores`` [C] for binary labels ``positive`` [C], as standalone_eval's highlight AP:
    the mean, over the distinct recall levels reached, of the best precision at that recall or more
    (so clips of equal score enter together and count once); 1 when every clip is positive, 0 when none is."""
    positive = np.asarray(positive, dtype=bool)
    if positive.all():
        return 1.0
    if not positive.any():
        return 0.0
    scores = np.asarray(scores, dtype=np.float64)
    thresholds = np.unique(scores)[::-1]  # each distinct score, highest first
    above = scores[None, :] >= thresholds[:, None]
    found = (above & positive).sum(axis=1)
    precision = found / above.sum(axis=1)
    recall = found / positive.sum()
    best = np.maximum.accumulate(precision[::-1])[::-1]
    levels = np.flatnonzero(np.diff(np.concatenate([[0.0], recall])) > 0)
    return float(np.mean(best[levels]))


def clip_labels(duration, relevant_clip_ids, saliency_scores):
    """[int(duration / CLIP_SECONDS), 3] saliency of every clip of a video: the annotators' scores on
    ``relevant_clip_ids``, 0 elsewhere (ids past the video's clips are dropped)."""
    labels = np.zeros((int(duration / CLIP_SECONDS), 3))
    ids = np.asarray(relevant_clip_ids, dtype=np.int64)
    scores = np.asarray(saliency_scores, dtype=np.float64).reshape(-1, 3)
    inside = ids < len(labels)
    labels[ids[inside]] = scores[inside]
    return labels


def highlight_metrics(saliency, labels):
    """Highlight detection as standalone_eval reports it. ``saliency``: per query a predicted score per
    clip; ``labels``: per query :func:`clip_labels`. A prediction longer than the video's clips is cut,
    a shorter one padded with 0. Returns {"HL-min-{level}-mAP", "HL-min-{level}-Hit1"} in percent."""
    results = {}
    for level, minimum in SALIENCY_LEVELS.items():
        aps, hits = [], []
        for scores, label in zip(saliency, labels):
            positive = label >= minimum  # [C, 3]
            scores = np.asarray(scores, dtype=np.float64)
            best = int(np.argmax(scores)) if len(scores) else len(positive)  # a clip past the video: no hit
            hits.append(bool(positive[best].any()) if best < len(positive) else False)
            scores = np.pad(scores[:len(positive)], (0, max(0, len(positive) - len(scores))))
            aps.extend(clip_saliency_ap(positive[:, a], scores) for a in range(positive.shape[1]))
        results[f"HL-min-{level}-mAP"] = _percent(np.mean(aps)) if aps else 0.0
        results[f"HL-min-{level}-Hit1"] = _percent(np.mean(hits)) if hits else 0.0
    return results
