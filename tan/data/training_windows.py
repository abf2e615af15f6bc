"""Training on videos longer than a model should see whole, by windows (INPUT.TRAIN_WINDOW).

A model that resamples a video to N clips sees a 10-second moment of an
hour-long training video as a fraction of one cell, and learns nothing of
it. With INPUT.TRAIN_WINDOW.LENGTH set, a training item of a video longer
than INPUT.TRAIN_WINDOW.LONGER_THAN is a window of that many seconds that
holds the query's moment, taken as the model takes a video (its rows
resampled, or sampled, to the model's clips): the moment is placed in the
window's seconds and the window is the item's duration. The window is drawn
from (SEED, the epoch, the dataset, the query), as the clip inputs draw
theirs, so a resumed run and any number of loader workers draw the same.
Evaluation windows long videos in the same way (TEST.WINDOW, which takes the
window's length as the trained span).

A model that has only seen windows holding the moment it is asked about has
never learnt a low score for a window without it, and evaluation by windows
compares the scores of many windows that lack it. INPUT.TRAIN_WINDOW.NEGATIVES
draws that share of the windows away from the moment: the item's moment is
then the empty moment at the window's edge, which no cell overlaps, so a
loss against each cell's IoU with the moment scores every cell of the window
towards 0. The models trained on batches of videos contrast each sentence's
moment with the others' and need it in the window: they are refused
NEGATIVES.

A model that trains on windows of its own clips (a clip input of variable
length) already does this and is refused the setting.

Negatives teach each window's map on its own. To rank the windows of one
video against each other, as grounding a long video must, a training query
also brings INPUT.TRAIN_WINDOW.RANKED_WINDOWS windows of its video on a fixed
grid (the evaluation's: LENGTH every LENGTH / 2), besides one of the grid
holding its moment: the nearest on either side that share no row with the
moment (the hardest: the same scene a little before or after) and others
drawn from the whole video. The grid lets the windows drawn by the queries
of one video in a batch coincide, so that each is read and encoded once.
"""
import math
from typing import NamedTuple

import numpy as np

from ..config.checks import is_number, register_config_check
from ..config.models import need
from .features.rows import window_rows, window_spans


class TrainingWindows(NamedTuple):
    """Windows of ``length`` seconds for the training videos longer than ``longer_than``; a
    ``negatives`` share of them drawn away from the moment."""
    length: float
    longer_than: float
    negatives: float = 0.0
    ranked: int = 0

    @classmethod
    def from_config(cls, cfg):
        """The settings of INPUT.TRAIN_WINDOW, or None when LENGTH is 0 (videos are taken whole)."""
        window = cfg.INPUT.TRAIN_WINDOW
        if not window.LENGTH:
            return None
        return cls(float(window.LENGTH), float(window.LONGER_THAN) or float(window.LENGTH), float(window.NEGATIVES),
                   int(window.RANKED_WINDOWS))

    def ranked_windows(self, rng, duration, num_rows, moment):
        """The windows of a video of ``duration`` s and ``num_rows`` feature rows that a query of
        ``moment`` (start, end) s is ranked in (RANKED_WINDOWS): [ItemWindow], the first holding the
        moment, then the nearest grid windows before and after it that share no row with the moment,
        then others without it drawn from the whole grid; fewer where the video has fewer. None
        when no grid window holds the whole moment (longer than half a window) or none is without it."""
        grid = [ItemWindow(*window_rows(num_rows, duration, s, e))
                for s, e in window_spans(duration, self.length, self.length / 2, num_rows)]
        first, last, _, _ = window_rows(num_rows, duration, float(moment[0]), float(moment[1]))  # the moment's rows
        holding = [w for w in grid if w.holds(moment)]
        before = [w for w in grid if w.last <= first]
        after = [w for w in grid if w.first >= last]
        if not holding or not before + after:
            return None
        chosen = [holding[int(rng.integers(len(holding)))]] + before[-1:] + after[:1]
        others = before[:-1] + after[1:]
        extra = max(0, self.ranked - len(chosen) + 1)
        picked = rng.choice(len(others), min(extra, len(others)), replace=False) if others else []
        return (chosen + [others[int(i)] for i in sorted(picked)])[:self.ranked + 1]

    def applies_to(self, duration):
        return duration > self.longer_than

    def trained_seconds(self, duration):
        """What a training item of a video of ``duration`` seconds lasts."""
        return self.length if self.applies_to(duration) else duration

    def draw(self, rng, duration, moment, rate=None):
        """The start (seconds) of a window of a video of ``duration`` s holding ``moment`` (start, end):
        uniform over the starts whose window holds all of it, or, for a moment longer than the
        window, over those inside it. With ``negatives``, that share of the draws is a window that
        shares no feature row with the moment (rows of ``rate`` a second; where the video has room)."""
        start, end = float(moment[0]), float(moment[1])
        if self.negatives and rng.random() < self.negatives:
            first, last = start, end
            if rate:  # a window takes every row it overlaps: keep clear of the moment's first and last rows
                first, last = math.floor(start * rate + 1e-6) / rate, math.ceil(end * rate - 1e-6) / rate
            away = self._away(rng, duration, first, last)
            if away is not None:
                return away
        low, high = (start, end - self.length) if end - start >= self.length else (end - self.length, start)
        low, high = max(0.0, low), min(high, duration - self.length)
        return float(rng.uniform(low, high)) if high > low else max(0.0, min(low, duration - self.length))

    def _away(self, rng, duration, start, end):
        """A start uniform over the windows that end by ``start`` or begin at ``end`` or later; None
        when there is none."""
        before, after = max(0.0, start - self.length), max(0.0, duration - self.length - end)
        if before + after <= 0:
            return None
        position = float(rng.uniform(0.0, before + after))
        return position if position < before else end + (position - before)


class ItemWindow(NamedTuple):
    """A training item's window: feature rows [first, last) of its video, lasting [start, end) s."""
    first: int
    last: int
    start: float
    end: float

    @classmethod
    def of(cls, num_rows, duration, start, length):
        return cls(*window_rows(num_rows, duration, start, start + length))

    @property
    def duration(self):
        return self.end - self.start

    def placed(self, moments):
        """``moments`` [..., 2] (seconds of the video) in the window's seconds, clipped to it."""
        return np.clip(np.asarray(moments, dtype=np.float32) - np.float32(self.start), 0.0,
                       np.float32(self.duration)).astype(np.float32)

    def holds(self, moment):
        """Whether ``moment`` (start, end) s lies within the window."""
        return self.start <= float(moment[0]) and float(moment[1]) <= self.end


@register_config_check("INPUT.TRAIN_WINDOW")
def check_train_window_settings(cfg):
    """INPUT.TRAIN_WINDOW: seconds >= 0, videos windowed only when longer than the window, a share of negatives."""
    window = cfg.INPUT.TRAIN_WINDOW
    for key in ("LENGTH", "LONGER_THAN"):
        need(is_number(window[key]) and window[key] >= 0, f"INPUT.TRAIN_WINDOW.{key}",
             f"expected seconds >= 0 (0: {'videos are taken whole' if key == 'LENGTH' else 'the length'}), "
             f"got {window[key]!r}")
    need(not (window.LONGER_THAN and window.LONGER_THAN < window.LENGTH), "INPUT.TRAIN_WINDOW.LONGER_THAN",
         f"{window.LONGER_THAN} is shorter than INPUT.TRAIN_WINDOW.LENGTH {window.LENGTH}: a video shorter than "
         f"the window cannot be cut into one; expected 0 or at least the length")
    need(is_number(window.NEGATIVES) and 0.0 <= window.NEGATIVES < 1.0, "INPUT.TRAIN_WINDOW.NEGATIVES",
         f"expected a share in [0, 1), got {window.NEGATIVES!r}")
