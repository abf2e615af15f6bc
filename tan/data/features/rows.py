"""Clip features prepared as docs/model.md §1 describes: rows L2-normalised,
then resampled to a fixed number of clips. Where they are read from:
feature_sources.py."""
import math

import numpy as np


def l2_normalize_rows(feats, eps=1e-12):
    norms = np.linalg.norm(feats, axis=1, keepdims=True)
    return feats / np.maximum(norms, eps)


def resample(feats, num_pre_clips):
    """[T, D] -> [P, D]: mean over bucket b_k..b_{k+1}-1, b_k = round(k T / P) clamped to T - 1."""
    t = feats.shape[0]
    bounds = np.round(np.arange(num_pre_clips + 1, dtype=np.float32) / num_pre_clips * t).astype(np.int64)
    bounds = np.minimum(bounds, t - 1)
    starts, ends = bounds[:-1], bounds[1:]
    csum = np.concatenate([np.zeros((1, feats.shape[1])), np.cumsum(feats, axis=0, dtype=np.float64)])
    counts = (ends - starts)[:, None]
    means = (csum[ends] - csum[starts]) / np.maximum(counts, 1)
    out = np.where(counts > 0, means, feats[starts])
    return out.astype(np.float32)


def window_rows(num_rows, duration, start, end):
    """(first row, end row, their start and end seconds) of the feature rows [T, D] of a video of
    ``duration`` seconds that a window [start, end) covers: every row that overlaps it, at least
    one. The window is taken as those rows: its moments are placed by their seconds."""
    rate = num_rows / duration
    first = min(int(math.floor(start * rate + 1e-6)), num_rows - 1)
    last = min(max(int(math.ceil(end * rate - 1e-6)), first + 1), num_rows)
    return first, last, first / rate, last / rate
