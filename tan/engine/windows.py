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
from typing import NamedTuple

import numpy as np
import torch

from ..data.features.rows import window_rows, window_size_in_rows, window_spans
from ..errors import TanError
from ..structures.candidates import Candidates
from .evaluation import top_candidates
from .relevance_stage import final_scores, window_relevance


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
        return f"{self.describe_windows()} for videos longer than {self.longer_than:.4g} s"

    def describe_windows(self):
        return f"windows of {self.length:.4g} s every {self.stride:.4g} s"


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
def ground_in_windows(cfg, video, encoded_sentences, device, topk, prepare, ground_pairs, stage=None):
    """Top ``topk`` moments of each sentence over the windows of ``video`` (a :class:`WindowedVideo`):
    every window, or with a relevance ``stage`` (tan.engine.relevance_stage) each sentence's top
    windows by relevance, the full model encoding only the windows some sentence keeps.

    ``prepare(rows)`` -> (the model's input of a window [P, D], its real rows); ``ground_pairs(rows,
    counts, durations, pairs)`` -> for each (sentence, window of the batch) pair of ``pairs``, in
    order, (moments [K, 2] s within the window, their scores [K], filled [K]), for the windows whose
    inputs are stacked in ``rows``. Returns (moments [S, topk, 2], scores [S, topk], filled [S, topk],
    the window of each sentence's best moment [S]) on the CPU."""
    settings, sentences = video.settings, len(encoded_sentences)
    bounds = [window_rows(len(video.features), video.duration, s, e) for s, e in video.spans]
    logits = window_relevance(stage, video, bounds, encoded_sentences, prepare, device, cfg) if stage else None
    asked = (stage.kept(logits).tolist() if stage else [list(range(len(bounds)))] * sentences)
    found = [[] for _ in range(sentences)]  # per sentence: (moments [K, 2] video seconds, scores [K], window)
    needed = sorted(set(w for windows in asked for w in windows))
    for first in range(0, len(needed), settings.batch):
        batch = needed[first:first + settings.batch]
        prepared = [prepare(video.features[bounds[w][0]:bounds[w][1]]) for w in batch]
        sizes = sorted({len(p[0]) for p in prepared})
        if len(sizes) > 1:  # spans in seconds that are not on the rows: windows a row apart in size
            raise TanError(f"windows of {' and '.join(map(str, sizes))} rows in one batch: the windows must "
                           f"hold the same rows each; lay them on the video's rows (WindowedVideo.of)")
        rows = torch.stack([p[0] for p in prepared]).to(device)
        durations = torch.tensor([bounds[w][3] - bounds[w][2] for w in batch], dtype=torch.float32)
        place = {w: i for i, w in enumerate(batch)}
        pairs = [(s, place[w]) for s in range(sentences) for w in sorted(asked[s]) if w in place]
        for (s, i), (moments, scores, filled) in zip(pairs, ground_pairs(rows, [p[1] for p in prepared], durations,
                                                                          pairs)):
            found[s].append((moments[filled] + bounds[batch[i]][2], scores[filled], batch[i]))
    return merge_windows(found, topk, cfg.TEST.NMS_THRESH, stage, cfg.TEST.WINDOW.NORMALIZE, logits)


def merge_windows(found, topk, nms_thresh, stage=None, normalize=False, logits=None):
    """One NMS over the whole video of every kept moment (``found``: per sentence, (moments [K, 2] video
    seconds, scores [K], window) of each window it was grounded in, in the windows' order), by final
    score (tan.engine.relevance_stage.final_scores; ``logits`` [S, W] the windows' relevance), top ``topk``."""
    probability = logits.softmax(1) if logits is not None else None
    parts = []
    for s, per in enumerate(found):
        scores = torch.cat([c for _, c, _ in per]) if per else torch.zeros(0)
        window = torch.cat([torch.full((len(c),), w, dtype=torch.long) for _, c, w in per]) if per else \
            torch.zeros(0, dtype=torch.long)
        relevance = (logits[s][window], probability[s][window]) if logits is not None else (None, None)
        moments = torch.cat([m for m, _, _ in per]) if per else torch.zeros(0, 2)
        parts.append((moments, final_scores(stage, normalize, scores.float(), *relevance), window))
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
