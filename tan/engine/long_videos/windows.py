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

from ...config.checks import is_int, is_number, register_config_check
from ...config.choices import RELEVANCE_CHOICES, SCORE_CHOICES
from ...config.models import need
from ...data.features.rows import window_rows, window_size_in_rows, window_spans
from ...errors import TanError
from ...utils.logger import get_logger
from ...structures.candidates import Candidates
from ...evaluation.selection import top_candidates
from .relevance_stage import final_scores, window_relevance


class WindowSettings(NamedTuple):
    """Windows of ``length`` seconds every ``stride`` seconds, for videos longer than
    ``longer_than`` seconds; ``batch`` windows per forward, ``candidates`` moments of each
    window kept for the merge (0: every candidate, no NMS within a window). ``cover_end``: the
    last window ends at the video's end (else none after the last that ends before it,
    tan.data.features.rows.window_spans);
    ``rows_per_second``: the features' fixed rate, on whose clock the windows and their moments
    are laid (row r at r / rate seconds); 0: the rows span the video's annotated duration."""
    length: float
    stride: float
    longer_than: float
    batch: int
    candidates: int
    cover_end: bool = True
    rows_per_second: float = 0.0

    def applies_to(self, duration):
        return duration > self.longer_than

    def describe(self):
        return f"{self.describe_windows()} for videos longer than {self.longer_than:.4g} s"

    def describe_windows(self):
        layout = "" if self.cover_end else ", none after the last that ends before the video's end"
        clock = f", on the rows' clock ({self.rows_per_second:g} a second)" if self.rows_per_second else ""
        return f"windows of {self.length:.4g} s every {self.stride:.4g} s{layout}{clock}"

    def clock(self, duration, num_rows, what="the video"):
        """(the span a video's rows are laid on, in the clock's units, and how many units make a second):
        its seconds (``duration``), or, with ``rows_per_second``, its rows, one unit each, so that a
        window's bounds and its cells' moments are whole rows until they are turned into seconds once.
        Rows that at that rate would not last the video's duration are refused, naming ``what``: its
        moments would be placed at seconds it does not have."""
        if not self.rows_per_second:
            return float(duration), 1.0
        rate = float(self.rows_per_second)
        if abs(num_rows / rate - duration) > max(1.0, 0.01 * duration):
            raise TanError(f"{what}: {num_rows} feature rows at TEST.WINDOW.ROWS_PER_SECOND {rate:g} last "
                           f"{num_rows / rate:.1f} s, but its duration is {duration:.1f} s; set "
                           f"TEST.WINDOW.ROWS_PER_SECOND to its features' rate (about {num_rows / duration:.3g}), or "
                           f"0 to lay its rows over its duration")
        return float(num_rows), rate

    def spans(self, duration, num_rows, what="the video"):
        """The windows of a video of ``duration`` seconds and ``num_rows`` feature rows, laid on its
        rows, in the units of :meth:`clock`."""
        span, units = self.clock(duration, num_rows, what)
        return window_spans(span, self.length * units, self.stride * units, num_rows, self.cover_end)


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
    settings = WindowSettings(length, stride, max(longer_than, length), int(window.BATCH), int(window.CANDIDATES),
                              bool(window.COVER_END), float(window.ROWS_PER_SECOND))
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
    span, units = settings.clock(duration, num_rows)
    rows, _ = window_size_in_rows(span, settings.length * units, settings.stride * units, num_rows)
    if len(spans) == 1:
        return (f"a video of {duration:.1f} s: scored whole: it has {num_rows} feature "
                f"row{'' if num_rows == 1 else 's'}, no more than one window of {settings.length:.4g} s takes "
                f"({rows} at its rate)")
    start, end = spans[0]
    return (f"a video of {duration:.1f} s: grounded in {len(spans)} windows of {(end - start) / units:.4g} s "
            f"({rows} feature row{'' if rows == 1 else 's'} each) every {settings.stride:.4g} s")


class WindowedVideo(NamedTuple):
    """A long video prepared for windowed grounding: its features as read (the model's input is
    made per window, when it is grounded), its duration (seconds) and its windows, in the units of
    its clock (:meth:`WindowSettings.clock`: seconds, or rows)."""
    features: np.ndarray
    duration: float
    spans: list
    settings: WindowSettings

    @classmethod
    def of(cls, features, duration, settings, what="the video"):
        """The video of ``features`` [T, D] in the windows of ``settings``, laid on its rows (``what``
        names it in an error)."""
        return cls(features, float(duration), settings.spans(duration, len(features), what), settings)

    @property
    def units(self):
        """How many units of the windows' clock make a second."""
        return self.settings.clock(self.duration, len(self.features))[1]

    def bounds(self, window):
        """(first row, end row, start, end) of ``window``, its start and end in the clock's units."""
        span, _ = self.settings.clock(self.duration, len(self.features))
        return window_rows(len(self.features), span, *self.spans[window])

    def seconds(self, moments):
        """Moments in the clock's units as the video's seconds: one division, so that on the rows' clock
        a moment of whole rows lands at row / rate in float32, as a benchmark's own evaluation computes it."""
        units = self.units
        return moments if units == 1.0 else moments / units


# Above this many candidates of one sentence (a long video's every cell, TEST.WINDOW.CANDIDATES 0), only
# the best ones by score are held until the merge; the NMS is checked to have decided within them.
HELD_CANDIDATES = 20000


@torch.no_grad()
def ground_in_windows(cfg, video, encoded_sentences, device, topk, prepare, ground_pairs, stage=None):
    """Top ``topk`` moments of each sentence over the windows of ``video`` (a :class:`WindowedVideo`):
    every window, or with a relevance ``stage`` (tan.engine.long_videos.relevance_stage) each sentence's top
    windows by relevance, the full model encoding only the windows some sentence keeps.

    ``prepare(rows)`` -> (the model's input of a window [P, D], its real rows); ``ground_pairs(rows,
    counts, durations, pairs)`` -> for each (sentence, window of the batch) pair of ``pairs``, in
    order, (moments [K, 2] within the window, their scores [K], filled [K]), for the windows whose
    inputs are stacked in ``rows`` (``durations``: the windows' lengths in the clock's units). Returns
    (moments [S, topk, 2] seconds, scores [S, topk], filled [S, topk], the window of each sentence's
    best moment [S]) on the CPU."""
    sentences = len(encoded_sentences)
    bounds = [video.bounds(w) for w in range(len(video.spans))]
    logits = window_relevance(stage, video, bounds, encoded_sentences, prepare, device, cfg) if stage else None
    asked = (stage.kept(logits).tolist() if stage else [list(range(len(bounds)))] * sentences)
    # holding the best candidates only is exact where a moment's final score is its own score
    held = HELD_CANDIDATES if stage is None and not cfg.TEST.WINDOW.NORMALIZE else 0
    found = _grounded(video, bounds, asked, range(sentences), held, prepare, ground_pairs, device)
    merged = merge_windows(found, topk, cfg.TEST.NMS_THRESH, stage, cfg.TEST.WINDOW.NORMALIZE, logits)
    undecided = [s for s in range(sentences) if not found[s].decided(merged[1][s], merged[2][s])]
    while undecided:  # the NMS reached the candidates let go: those sentences again, holding 8 times more
        held = held * 8 if held * 8 < len(bounds) * HELD_CANDIDATES else 0  # 0: every candidate at last
        get_logger("inference").info("%d sentence(s) grounded again holding %s of their candidates, their NMS "
                                     "having reached below the best held", len(undecided),
                                     f"the best {held}" if held else "every one")
        again = _grounded(video, bounds, asked, undecided, held, prepare, ground_pairs, device)
        redone = merge_windows(again, topk, cfg.TEST.NMS_THRESH, stage, cfg.TEST.WINDOW.NORMALIZE, logits)
        for row, s in enumerate(undecided):
            for part, again_part in zip(merged, redone):
                part[s] = again_part[row]
        undecided = [s for row, s in enumerate(undecided) if not again[s].decided(redone[1][row], redone[2][row])]
    return merged


def _grounded(video, bounds, asked, sentences, held, prepare, ground_pairs, device):
    """{sentence: its :class:`Found`} for ``sentences``, each grounded in the windows ``asked`` of it."""
    found = {s: Found(held) for s in sentences}
    needed = sorted(set(w for s in sentences for w in asked[s]))
    for first in range(0, len(needed), video.settings.batch):
        batch = needed[first:first + video.settings.batch]
        prepared = [prepare(video.features[bounds[w][0]:bounds[w][1]]) for w in batch]
        sizes = sorted({len(p[0]) for p in prepared})
        if len(sizes) > 1:  # spans in seconds that are not on the rows: windows a row apart in size
            raise TanError(f"windows of {' and '.join(map(str, sizes))} rows in one batch: the windows must "
                           f"hold the same rows each; lay them on the video's rows (WindowedVideo.of)")
        rows = torch.stack([p[0] for p in prepared]).to(device)
        durations = torch.tensor([bounds[w][3] - bounds[w][2] for w in batch], dtype=torch.float32)
        place = {w: i for i, w in enumerate(batch)}
        pairs = [(s, place[w]) for s in sentences for w in sorted(asked[s]) if w in place]
        for (s, i), (moments, scores, filled) in zip(pairs, ground_pairs(rows, [p[1] for p in prepared], durations,
                                                                          pairs)):
            found[s].add(video.seconds(moments[filled] + bounds[batch[i]][2]), scores[filled], batch[i])
    return found


class Found:
    """One sentence's candidates from its windows, in the windows' order: (moments [K, 2] seconds,
    scores [K], window) each. With ``held`` > 0, once they are more than twice that many only the
    best ``held`` by score are kept (ties: the earlier, as the NMS takes them), and ``floor`` is the
    best score let go: an NMS over the rest decides as over them all where it keeps its last moment
    above the floor."""

    def __init__(self, held=0):
        self.held, self.parts, self.count, self.floor = held, [], 0, None

    def add(self, moments, scores, window):
        self.parts.append((moments, scores, torch.full((len(scores),), window, dtype=torch.long)))
        self.count += len(scores)
        if self.held and self.count > 2 * self.held:
            moments, scores, windows = self.tensors()
            order = torch.sort(scores, descending=True, stable=True).indices
            floor = float(scores[order[self.held]])
            self.floor = floor if self.floor is None else max(self.floor, floor)
            kept = order[:self.held].sort().values  # back in the windows' order
            self.parts, self.count = [(moments[kept], scores[kept], windows[kept])], self.held

    def tensors(self):
        """(moments [K, 2], scores [K], windows [K]) of the candidates held."""
        if not self.parts:
            return torch.zeros(0, 2), torch.zeros(0), torch.zeros(0, dtype=torch.long)
        return tuple(torch.cat(column) for column in zip(*self.parts))

    def decided(self, kept_scores, filled):
        """Whether an NMS that kept ``kept_scores`` [topk] (``filled``) over the held candidates decided as
        over every candidate: nothing was let go, or every slot is filled above the best let go."""
        return self.floor is None or bool(filled.all() and kept_scores[filled][-1] > self.floor)


# How many (sentence, candidate) pairs one NMS over a video holds at once: sentences are merged in groups.
MERGE_ELEMENTS = 1 << 22


def merge_windows(found, topk, nms_thresh, stage=None, normalize=False, logits=None):
    """One NMS over the whole video of every kept moment (``found``: per sentence, a :class:`Found`, or
    a list of (moments [K, 2] video seconds, scores [K], window) of each window it was grounded in, in
    the windows' order), by final score (tan.engine.long_videos.relevance_stage.final_scores; ``logits`` [S, W] the
    windows' relevance), top ``topk``. Returns (moments [S, topk, 2], scores, filled, the window of each
    sentence's best moment [S])."""
    probability = logits.softmax(1) if logits is not None else None
    parts = []
    for s, per in (found.items() if isinstance(found, dict) else enumerate(found)):
        if not isinstance(per, Found):
            listed = Found()
            for m, c, w in per:
                listed.add(m, c, w)
            per = listed
        moments, scores, window = per.tensors()
        relevance = (logits[s][window], probability[s][window]) if logits is not None else (None, None)
        parts.append((moments, final_scores(stage, normalize, scores.float(), *relevance), window))
    results, group = [], []
    for part in parts + [None]:  # the sentences in groups of at most MERGE_ELEMENTS candidates
        if part is not None and (not group or (len(group) + 1) * max(len(p[1]) for p in group + [part]) <=
                                 MERGE_ELEMENTS):
            group.append(part)
            continue
        results.append(_merged(group, topk, nms_thresh))
        group = [part]
    return tuple(torch.cat(column) for column in zip(*results))


def _merged(parts, topk, nms_thresh):
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


@register_config_check("TEST.WINDOW")
def check_window_settings(cfg):
    """TEST.WINDOW: seconds >= 0 (0: as trained), a stride no longer than the length, counts >= 1."""
    window = cfg.TEST.WINDOW
    for key in ("LENGTH", "STRIDE", "LONGER_THAN"):
        value = window[key]
        need(is_number(value) and value >= 0, f"TEST.WINDOW.{key}",
             f"expected seconds >= 0 (0: as trained), got {value!r}")
    need(not (window.STRIDE and window.LENGTH and window.STRIDE > window.LENGTH), "TEST.WINDOW.STRIDE",
         f"{window.STRIDE} is longer than TEST.WINDOW.LENGTH {window.LENGTH}: the windows would leave gaps; "
         f"expected at most the length")
    need(is_int(window.BATCH) and window.BATCH >= 1, "TEST.WINDOW.BATCH",
         f"expected an integer >= 1, got {window.BATCH!r}")
    need(is_int(window.CANDIDATES) and window.CANDIDATES >= 0, "TEST.WINDOW.CANDIDATES",
         f"expected an integer >= 0 (0: every candidate of every window), got {window.CANDIDATES!r}")
    need(is_number(window.ROWS_PER_SECOND) and window.ROWS_PER_SECOND >= 0, "TEST.WINDOW.ROWS_PER_SECOND",
         f"expected feature rows a second > 0, or 0 (the rows span the annotated duration), got "
         f"{window.ROWS_PER_SECOND!r}")
    need(is_int(window.TOP_K) and window.TOP_K >= 1, "TEST.WINDOW.TOP_K",
         f"expected a number of windows >= 1 that each sentence keeps, got {window.TOP_K!r}")
    for key, choices in (("RELEVANCE", RELEVANCE_CHOICES), ("SCORE", SCORE_CHOICES)):
        need(window[key] in choices, f"TEST.WINDOW.{key}",
             f"expected {' or '.join(repr(c) for c in choices)}, got {window[key]!r}")
    for key in ("NORMALIZE", "COVER_END"):
        need(isinstance(window[key], bool), f"TEST.WINDOW.{key}", f"expected True or False, got {window[key]!r}")
