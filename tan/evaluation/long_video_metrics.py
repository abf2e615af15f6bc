"""The metrics of the long-video benchmarks, with their official evaluators' arithmetic
(docs/long_videos.md, "Metrics of the long-video benchmarks").

Ego4D NLQ (EGO4D/episodic-memory, NLQ/VSLNet/utils/evaluate_ego4d_nlq.py): R@1 and R@5
at IoU 0.3 and 0.5, and mIoU.

* the IoU of two windows is their intersection over their hull (the span from the
  earlier start to the later end), in float64; a query window of zero length (about
  one query in seven of the release has one) overlaps nothing of positive length, so
  its IoU is 0, and 0 / 0 (a zero-length prediction on it) is NaN, as numpy divides;
* a hit is an IoU *above* the threshold (an IoU of exactly 0.5 misses at 0.5) in the
  first k predictions listed;
* mIoU is the mean IoU of each query's *first* prediction (the evaluator sorts the IoUs
  of the first prediction alone and keeps the best three of that one value);
* the means are over the queries predicted, not over every query of the annotations;
  the count of both is reported beside them. tan's figures are over every query of the
  file with a sentence: those it could not predict (a clip without features) count as
  misses, as a submission of every query would score them at best.

MAD (Soldelli/MAD, its VLG-Net evaluation): R@{1, 5, 10, 50, 100} at IoU {0.1, 0.3,
0.5}, the thresholds its inference asks for (tan adds 0.7 with the same arithmetic).

* the IoU is the intersection (at least 0) over the hull, in float32;
* a hit is an IoU *at or above* the threshold in the first k predictions;
* a query with fewer than 100 predictions counts the missing ones as IoU 0;
* the means are over every query evaluated; a query whose window has no length is scored against
  the moment of the query before it, as MAD's loader gives it (tan.data.formats.mad), or, where it
  has none, counted as a miss, and so, in tan's figures, is every other query of the file with a
  sentence and a movie that could not be predicted (a movie without features).

Which moments a query's predictions are (MAD's windows, seconds and one NMS over every cell of
the movie) is the windowed grounding's (tan.engine.long_videos.windows, TEST.WINDOW in the MAD configs).

Values are percent; NLQ's rounded to two decimals as its table prints them, MAD's too.
"""
import numpy as np

NLQ_THRESHOLDS = (0.3, 0.5)
NLQ_TOPK = (1, 5)
# The figures as tan-test names them, in report order.
NLQ_METRIC_NAMES = ("NLQ-R@1,IoU@0.3", "NLQ-R@1,IoU@0.5", "NLQ-R@5,IoU@0.3", "NLQ-R@5,IoU@0.5", "NLQ-mIoU")
MAD_TOPK = (1, 5, 10, 50, 100)
MAD_THRESHOLDS = (0.1, 0.3, 0.5, 0.7)
MAD_METRIC_NAMES = tuple(f"MAD-R@{k},IoU@{t}" for k in MAD_TOPK for t in MAD_THRESHOLDS)


def _percent(value):
    return float(f"{100.0 * value:.2f}")


def nlq_iou(predicted, window):
    """IoU [P] of predicted windows [P, 2] with the query's window (start, end), seconds: the
    intersection over the hull, float64 (NaN for 0 / 0)."""
    predicted = np.asarray(predicted, dtype=np.float64).reshape(-1, 2)
    start, end = float(window[0]), float(window[1])
    inter = np.maximum(0.0, np.minimum(predicted[:, 1], end) - np.maximum(predicted[:, 0], start))
    hull = np.maximum(0.0, np.maximum(predicted[:, 1], end) - np.minimum(predicted[:, 0], start))
    with np.errstate(invalid="ignore", divide="ignore"):
        return inter / hull


def nlq_metrics(predictions, windows, num_queries=None, empty_windows=0, misses=0):
    """Ego4D NLQ's R@k at IoU t and mIoU, percent.

    ``predictions``: per query, its predicted windows [P >= 1, 2] (seconds, best first);
    ``windows``: per query, its (start, end) window (clip seconds); ``num_queries``: how many
    queries the annotations hold (reported, as the evaluator reports it); ``empty_windows``: more
    queries predicted whose window has no length, each with IoU 0 for every prediction of positive
    length, as the evaluator computes it; ``misses``: more queries that could not be predicted (their
    clip has no features), each a miss of IoU 0. Returns {"R@k,IoU@t": ..., "mIoU": ...,
    "evaluated": Q, "queries": num_queries or Q}."""
    if len(predictions) != len(windows):
        raise ValueError(f"{len(predictions)} predictions for {len(windows)} query windows")
    hits = {(t, k): [] for t in NLQ_THRESHOLDS for k in NLQ_TOPK}
    first = []
    for index, (predicted, window) in enumerate(zip(predictions, windows)):
        if len(predicted) == 0:
            raise ValueError(f"query {index} has no predicted window; the NLQ evaluator needs at least one")
        iou = nlq_iou(predicted, window)
        first.append(iou[0])
        for t, k in hits:
            hits[t, k].append(bool((iou[:k] > t).any()))
    for t, k in hits:
        hits[t, k] += [False] * (empty_windows + misses)
    first += [0.0] * (empty_windows + misses)
    result = {f"R@{k},IoU@{t}": _percent(np.mean(hits[t, k])) for k in NLQ_TOPK for t in NLQ_THRESHOLDS}
    result["mIoU"] = _percent(np.mean(first))
    evaluated = len(windows) + empty_windows + misses
    result.update(evaluated=evaluated, queries=evaluated if num_queries is None else int(num_queries))
    return result


def mad_iou(predicted, window):
    """IoU [P] of predicted windows [P, 2] with (start, end): the intersection, at least 0, over
    the hull, float32."""
    predicted = np.asarray(predicted, dtype=np.float32).reshape(-1, 2)
    start, end = np.float32(window[0]), np.float32(window[1])
    inter = np.maximum(np.minimum(predicted[:, 1], end) - np.maximum(predicted[:, 0], start), np.float32(0))
    hull = np.maximum(predicted[:, 1], end) - np.minimum(predicted[:, 0], start)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (inter / hull).astype(np.float32)


def mad_metrics(predictions, windows, misses=0):
    """MAD's R@k at IoU t, percent. ``predictions``: per query, its windows [P, 2] (seconds,
    best first, any number: beyond 100 unused, missing ones IoU 0); ``windows``: per query,
    (start, end); ``misses``: more queries, each scored a miss at every k and t (those whose
    window has no length). Returns {"R@k,IoU@t": ..., "evaluated": Q + misses}."""
    if len(predictions) != len(windows):
        raise ValueError(f"{len(predictions)} predictions for {len(windows)} query windows")
    most = MAD_TOPK[-1]
    counts = np.zeros((len(MAD_TOPK), len(MAD_THRESHOLDS)))
    thresholds = np.asarray(MAD_THRESHOLDS, dtype=np.float32)
    for predicted, window in zip(predictions, windows):
        iou = np.zeros(most, dtype=np.float32)
        found = mad_iou(predicted, window)[:most]
        iou[:len(found)] = found
        hit = iou[:, None] >= thresholds[None, :]  # [100, T]
        for r, k in enumerate(MAD_TOPK):
            counts[r] += hit[:k].any(axis=0)
    counts /= max(len(windows) + misses, 1)
    result = {f"R@{k},IoU@{t}": _percent(counts[r, c]) for r, k in enumerate(MAD_TOPK)
              for c, t in enumerate(MAD_THRESHOLDS)}
    result["evaluated"] = len(windows) + misses
    return result
