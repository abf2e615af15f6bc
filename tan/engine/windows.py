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
as they compare across the videos of an evaluation.
"""
import math
from typing import NamedTuple

import numpy as np
import torch

from ..data.features.rows import window_rows
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
    return settings, f"{settings.describe()} (length from {source})"


def window_spans(duration, length, stride):
    """[(start, end)] seconds: windows of ``length`` every ``stride`` from 0, the last one
    ending at ``duration`` (moved back so that every window has the full length)."""
    if duration <= length:
        return [(0.0, float(duration))]
    count = math.ceil((duration - length) / stride) + 1
    starts = [min(i * stride, duration - length) for i in range(count)]
    return [(float(s), float(s) + length) for s in dict.fromkeys(starts)]


class WindowedVideo(NamedTuple):
    """A long video prepared for windowed grounding: its features as read (the model's input is
    made per window, when it is grounded), its duration and its windows."""
    features: np.ndarray
    duration: float
    spans: list
    settings: WindowSettings


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
