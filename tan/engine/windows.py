"""Grounding in a video longer than those a model was trained on, by windows (docs/long_videos.md).

A 2D map model sees a video as N clips whatever its length: trained on
2-minute videos, each cell covers about a second; asked about a 2-hour video
whole, each cell covers a minute, and a 10-second moment is smaller than one
cell. Here such a video is cut into overlapping windows of the length the
model was trained on (TEST.WINDOW.LENGTH, or the training videos' median
duration that a training run records in its checkpoint), each window is
taken as the model takes a training video (its rows resampled, or sampled,
to the model's clips), the windows are encoded in batches of
TEST.WINDOW.BATCH, each sentence is scored against every window, and each
window's best moments (after NMS within it) are placed at the video's
seconds and merged: one NMS over the whole video, top-k over the whole
video. Memory follows the batch of windows, not the video's length.

A window is scored as a video of its own, so scores compare across windows
as they compare across the videos of an evaluation. The windows are laid on
the video's feature rows (window_spans with its rows): each holds the same
number of whole rows, so a model that takes the rows at their own rate gets
inputs of one size, and no two start at the same row; a video whose rows
are no more than one window's is scored whole.
"""
import math
from typing import NamedTuple

import numpy as np
import torch

from ..data.features.rows import window_rows
from ..errors import TanError
from ..structures.candidates import Candidates
from .evaluation import top_candidates


class WindowSettings(NamedTuple):
    """Windows of ``length`` seconds every ``stride`` seconds, for videos longer than
    ``longer_than`` seconds; ``batch`` windows per forward, ``candidates`` moments of each
    window kept for the merge."""
    length: float
    stride: float
    longer_than: float
    batch: int
    candidates: int

    def applies_to(self, duration):
        return duration > self.longer_than

    def describe(self):
        return (f"windows of {self.length:.4g} s every {self.stride:.4g} s for videos longer than "
                f"{self.longer_than:.4g} s")


def window_settings(cfg, trained_span, evaluation=False):
    """(:class:`WindowSettings` or None, a sentence saying what was chosen and why).

    ``trained_span``: the checkpoint's record of the training videos ({"median": s,
    "longest": s, "videos": n}) or None; ``evaluation``: for tan-test and the periodic
    evaluation (TEST.WINDOW.IN_EVALUATION). None when TEST.WINDOW.ENABLED is off, or when
    neither the config nor the checkpoint gives a window length."""
    window = cfg.TEST.WINDOW
    if not window.ENABLED:
        return None, "TEST.WINDOW.ENABLED is off: every video is scored whole"
    if evaluation and not window.IN_EVALUATION:
        return None, ("TEST.WINDOW.IN_EVALUATION is off: the evaluation scores every video whole, as the "
                      "reference evaluates")
    span = trained_span if isinstance(trained_span, dict) else {}
    length = float(window.LENGTH) or float(span.get("median") or 0.0)
    if length <= 0:
        return None, ("every video is scored whole: the checkpoint records no training span and "
                      "TEST.WINDOW.LENGTH is 0; set TEST.WINDOW.LENGTH to window long videos")
    stride = float(window.STRIDE) or length / 2
    longer_than = float(window.LONGER_THAN) or float(span.get("longest") or 0.0) or length
    settings = WindowSettings(length, stride, max(longer_than, length), int(window.BATCH), int(window.CANDIDATES))
    source = "TEST.WINDOW.LENGTH" if window.LENGTH else f"the median of the {span.get('videos', '?')} training videos"
    return settings, f"{settings.describe()} (length from {source}); {_threshold_source(window, span, settings)}"


def _threshold_source(window, span, settings):
    """Where the threshold of ``settings`` comes from, for the log."""
    threshold, longest = f"{settings.longer_than:.4g} s", float(span.get("longest") or 0.0)
    if window.LONGER_THAN:
        raised = float(window.LONGER_THAN) < settings.longer_than
        return f"{threshold}: TEST.WINDOW.LONGER_THAN" + (", raised to the window's length" if raised else "")
    if longest:
        if longest < settings.longer_than:
            return f"{threshold}: the window's length, as the longest training video ({longest:.4g} s) is shorter"
        return f"{threshold}: the longest training video, as the model took it in"
    return f"{threshold}: the window's length, as the checkpoint records no longest training video"


def window_spans(duration, length, stride, num_rows=None):
    """[(start, end)] seconds: windows of ``length`` every ``stride`` from 0, the last one
    ending at ``duration`` (moved back so that every window has the full length); a video
    not longer than one window is one window, the whole video.

    With ``num_rows`` (the video's feature rows, which a window takes whole: tan.data.features.rows.
    window_rows), the windows are laid on the rows: every window holds the same number of rows
    (``length`` at the video's rate, at least one) and starts at the row nearest its start, so that
    a model that takes the rows at their own rate gets inputs of one
    size, and no two windows start at the same row; a video of no more rows than a window is one
    window."""
    if num_rows is not None:
        return _row_spans(duration, length, stride, int(num_rows))
    if duration <= length:
        return [(0.0, float(duration))]
    # a hair under the quotient: a float a hair above a whole number would add a window a hair after the
    # last, holding the same rows (the last window starts at duration - length whatever the count)
    count = math.ceil((duration - length) / stride - 1e-9) + 1
    starts = [i * stride for i in range(count - 1)]
    return [(float(s), float(s) + length) for s in starts] + [(float(duration - length), float(duration))]


def _row_spans(duration, length, stride, num_rows):
    rows, step = window_size_in_rows(duration, length, stride, num_rows)
    if rows >= num_rows:
        return [(0.0, float(duration))]
    last = num_rows - rows
    if step <= 1:  # a stride under a row: a window at every row (not one per stride, most of them the same)
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


def describe_windows(duration, spans, num_rows, settings):
    """What grounding a video of ``duration`` seconds and ``num_rows`` feature rows in ``spans``
    (:func:`window_spans` on its rows) does, for the log: its windows' real seconds and rows, or,
    for one window, that it is scored whole."""
    rows, _ = window_size_in_rows(duration, settings.length, settings.stride, num_rows)
    if len(spans) == 1:
        return (f"a video of {duration:.1f} s: scored whole: it has {num_rows} feature "
                f"row{'' if num_rows == 1 else 's'}, no more than one window of {settings.length:.4g} s takes "
                f"({rows} at its rate)")
    start, end = spans[0]
    return (f"a video of {duration:.1f} s: grounded in {len(spans)} windows of {end - start:.4g} s ({rows} feature "
            f"row{'' if rows == 1 else 's'} each) every {settings.stride:.4g} s")


class WindowedVideo(NamedTuple):
    """A long video prepared for windowed grounding: its features as read (the model's input is
    made per window, when it is grounded), its duration and its windows."""
    features: np.ndarray
    duration: float
    spans: list
    settings: WindowSettings

    @classmethod
    def of(cls, features, duration, settings):
        """The video of ``features`` [T, D] in the windows of ``settings``, laid on its rows."""
        return cls(features, float(duration), window_spans(duration, settings.length, settings.stride, len(features)),
                   settings)


@torch.no_grad()
def ground_in_windows(model, cfg, video, encoded_sentences, device, topk, prepare, ground_batch):
    """Top ``topk`` moments of each sentence over every window of ``video`` (a :class:`WindowedVideo`).

    ``prepare(rows)`` -> (the model's input of a window [P, D], its real rows); ``ground_batch(maps,
    counts, sentences, durations)`` -> per sentence, (moments [W, K, 2] s within each window, their
    scores [W, K], filled [W, K]) for the W windows encoded in ``maps``. Returns (moments [S, topk, 2],
    scores [S, topk], filled [S, topk], the window of each sentence's best moment [S]) on the CPU."""
    settings, sentences = video.settings, len(encoded_sentences)
    found = [[] for _ in range(sentences)]  # per sentence: (moments [K, 2], scores [K]) of each window, video seconds
    window_of = [[] for _ in range(sentences)]
    total_rows = len(video.features)
    for first in range(0, len(video.spans), settings.batch):
        spans = video.spans[first:first + settings.batch]
        bounds = [window_rows(total_rows, video.duration, s, e) for s, e in spans]
        prepared = [prepare(video.features[first_row:end_row]) for first_row, end_row, _, _ in bounds]
        sizes = sorted({len(p[0]) for p in prepared})
        if len(sizes) > 1:  # spans in seconds that are not on the rows: windows a row apart in size
            raise TanError(f"windows of {' and '.join(map(str, sizes))} rows in one batch: the windows must "
                           f"hold the same rows each; lay them on the video's rows (WindowedVideo.of)")
        rows = torch.stack([p[0] for p in prepared]).to(device)
        counts = [p[1] for p in prepared]
        durations = torch.tensor([e - s for _, _, s, e in bounds], dtype=torch.float32)
        starts = torch.tensor([s for _, _, s, _ in bounds], dtype=torch.float32)
        for s, (moments, scores, filled) in enumerate(ground_batch(rows, counts, encoded_sentences, durations)):
            for w in range(len(spans)):
                keep = filled[w]
                found[s].append((moments[w][keep] + starts[w], scores[w][keep]))
                window_of[s].append(torch.full((int(keep.sum()),), first + w, dtype=torch.long))
    return merge_windows(found, window_of, topk, cfg.TEST.NMS_THRESH)


def merge_windows(found, window_of, topk, nms_thresh):
    """One NMS over the whole video of every window's kept moments (video seconds), top ``topk``."""
    parts = [(torch.cat([m for m, _ in per]), torch.cat([s for _, s in per]), torch.cat(w))
             for per, w in zip(found, window_of)]
    width = max(1, max(len(s) for _, s, _ in parts))
    seconds = torch.zeros(len(parts), width, 2)
    scores = torch.zeros(len(parts), width)
    valid = torch.zeros(len(parts), width, dtype=torch.bool)
    windows = torch.full((len(parts), width), -1, dtype=torch.long)
    for row, (m, s, w) in enumerate(parts):
        seconds[row, :len(s)], scores[row, :len(s)], valid[row, :len(s)], windows[row, :len(s)] = m, s, True, w
    moments, kept, filled, cells = top_candidates(Candidates(scores, seconds, seconds, valid), nms_thresh, topk,
                                                  return_cells=True)
    best = torch.where(filled[:, 0], windows.gather(1, cells[:, :1])[:, 0], torch.full_like(cells[:, 0], -1))
    return moments, kept, filled, best
