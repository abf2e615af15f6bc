"""Clip features prepared as docs/model.md §1 describes: rows L2-normalised,
then resampled to a fixed number of clips; and the windows a long video is cut
into, laid on its rows (docs/long_videos.md). Where they are read from:
sources.py."""
import math

import numpy as np


def l2_normalize_rows(feats, eps=1e-12):
    norms = np.linalg.norm(feats, axis=1, keepdims=True)
    return feats / np.maximum(norms, eps)


def bucket_bounds(num_rows, num_clips):
    """[P + 1] the bounds b_k = round(k T / P) of ``num_clips`` buckets over ``num_rows`` rows, clamped
    to T - 1 (float32 arithmetic, as the reference codes compute them)."""
    bounds = np.round(np.arange(num_clips + 1, dtype=np.float32) / np.float32(num_clips)
                      * np.float32(num_rows)).astype(np.int64)
    return np.minimum(bounds, num_rows - 1)


def resample(feats, num_pre_clips):
    """[T, D] -> [P, D]: mean over bucket b_k..b_{k+1}-1 (bucket_bounds); an empty bucket takes row b_k."""
    bounds = bucket_bounds(feats.shape[0], num_pre_clips)
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


def window_spans(duration, length, stride, num_rows=None, cover_end=True):
    """[(start, end)] seconds: windows of ``length`` every ``stride`` from 0, the last one
    ending at ``duration`` (moved back so that every window has the full length); a video
    not longer than one window is one window, the whole video.

    With ``num_rows`` (the video's feature rows, which a window takes whole: tan.data.features.rows.
    window_rows), the windows are laid on the rows: every window holds the same number of rows
    (``length`` at the video's rate, at least one) and starts at the row nearest its start, so that
    a model that takes the rows at their own rate gets inputs of one
    size, and no two windows start at the same row; a video of no more rows than a window is one
    window.

    ``cover_end`` False lays them every ``stride`` from the start while a
    whole window ends before the video's end (before its last row), and no window after them, so
    the video's last seconds (up to a stride) are in none."""
    if num_rows is not None:
        return _row_spans(duration, length, stride, int(num_rows), cover_end)
    if duration <= length:
        return [(0.0, float(duration))]
    if not cover_end:
        count = math.ceil((duration - length) / stride - 1e-9)  # starts s = i * stride with s + length < duration
        return [(float(i * stride), float(i * stride) + length) for i in range(count)]
    # a hair under the quotient: a float a hair above a whole number would add a window a hair after the
    # last, holding the same rows (the last window starts at duration - length whatever the count)
    count = math.ceil((duration - length) / stride - 1e-9) + 1
    starts = [i * stride for i in range(count - 1)]
    return [(float(s), float(s) + length) for s in starts] + [(float(duration - length), float(duration))]


def _row_spans(duration, length, stride, num_rows, cover_end=True):
    rows, step = window_size_in_rows(duration, length, stride, num_rows)
    if rows >= num_rows:
        return [(0.0, float(duration))]
    last = num_rows - rows
    if not cover_end:  # starts every step from row 0, each below the last row a window can start at
        firsts = list(dict.fromkeys(min(math.floor(i * max(step, 1) + 0.5), last - 1)
                                    for i in range(math.ceil(last / max(step, 1) - 1e-9))))
    elif step <= 1:  # a stride under a row: a window at every row (not one per stride, most of them the same)
        firsts = range(last + 1)
    else:
        count = math.ceil(last / step - 1e-9) + 1
        # the row nearest each start (a length or stride recorded to 4 decimals lies a hair off the rows),
        # the last window ending at the last row
        firsts = dict.fromkeys([min(math.floor(i * step + 0.5), last) for i in range(count - 1)] + [last])
    seconds = float(duration) / num_rows
    return [(first * seconds, float(duration) if first == last else (first + rows) * seconds) for first in firsts]


def window_size_in_rows(duration, length, stride, num_rows):
    """(rows of a window, rows from one window's start to the next) of a video of ``num_rows``
    feature rows over ``duration`` seconds: the window's seconds at its rate rounded to whole rows,
    at least one; the stride at that rate, no longer than a window (no row left out between two)."""
    rate = num_rows / float(duration)
    rows = min(num_rows, max(1, math.floor(length * rate + 0.5)))
    return rows, min(float(rows), stride * rate)
