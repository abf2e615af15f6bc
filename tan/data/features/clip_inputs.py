"""How a model takes a video's clips (docs/models.md §2, "clip_input"): every
model declares one, and the datasets, the prediction tools and the API prepare
features through it, so that training and inference see the same input.

- :class:`ResampledClips` (the default): L2-normalised rows, averaged into a
  fixed number of clips.
- :class:`SampledClips`: a fixed number of clips, each the row in the middle
  of its bucket (no averaging).
- :class:`NativeClips`: the rows as they are, at their own rate: training
  draws a window of consecutive clips, evaluation reads the whole video; a
  video shorter than the window is padded. Batches then hold videos of
  different lengths, with ``clip_counts`` (real rows) and ``clip_offsets``
  (the window's first clip) beside the features; evaluation takes the
  longest videos first, so that a batch holds videos of similar lengths.

A clip input has two steps: :meth:`base` turns the rows read from disk into
what is cached per video; :meth:`take` gives one item's rows from it, with a
random generator for training items (None in evaluation). :meth:`row_sources`
says which rows on disk each row of an evaluation item is made from (training
across windows finds a moment's rows in a window by it): a clip input whose
``base`` mixes or resamples rows says how.
"""
import numpy as np

from .rows import bucket_bounds, l2_normalize_rows, resample


class ClipInput:
    """Fixed-length inputs (every item [num_clips, D]) unless ``variable_length``.
    ``longest_first``: evaluate the longest videos first (tan.data.loaders), as a
    reference code that sorts its test queries by duration batches them."""
    variable_length = False

    def __init__(self, num_clips, normalize=True, longest_first=False):
        self.num_clips = int(num_clips)
        self.normalize = bool(normalize)
        self.longest_first = bool(longest_first)

    def normalized(self, feats):
        """Rows L2-normalised (a model may use its reference's arithmetic instead)."""
        return l2_normalize_rows(feats).astype(feats.dtype, copy=False)

    def base(self, feats):
        """Rows [T, D] float32 -> what is cached for the video."""
        return self.normalized(feats) if self.normalize else feats

    def take(self, base, rng=None):
        """(rows [T', D] float32, index of the first clip taken, number of real rows) of one item:
        for a fixed-length input, the cached rows themselves."""
        return base, 0, len(base)

    def row_sources(self, num_rows):
        """[P, 2] int64: the rows [first, last) of ``num_rows`` read from disk that each row of what
        :meth:`take` gives in evaluation comes from (training across windows finds a moment's rows
        in a window by it): here each row its own."""
        return np.stack([np.arange(num_rows), np.arange(1, num_rows + 1)], axis=1)

    def trained_seconds(self, duration):
        """The seconds of a video of ``duration`` that one training item takes in: all of it."""
        return duration

    def whole_seconds(self, duration):
        """The seconds of a training video of ``duration`` that evaluation may score whole as the
        model was trained (the longest of them is the threshold of windowed grounding): what a
        training item takes in."""
        return self.trained_seconds(duration)

    def describe(self):
        return f"{type(self).__name__}({self.num_clips}{'' if self.normalize else ', not normalised'})"

    def rate_problem(self, rows, durations):
        """What is wrong with videos of ``rows`` feature rows lasting ``durations`` seconds
        (arrays, one entry per video) for this input, or None."""
        return None

    def __repr__(self):
        return self.describe()


class ResampledClips(ClipInput):
    """``num_clips`` clips, each the mean of its bucket of rows (tan.data.features.rows.resample)."""

    def base(self, feats):
        return resample(super().base(feats), self.num_clips)

    def row_sources(self, num_rows):
        return bucket_rows(num_rows, self.num_clips)


def bucket_rows(num_rows, num_clips):
    """[P, 2] the rows [first, last) of each of ``num_clips`` buckets over ``num_rows`` rows
    (bucket_bounds; an empty bucket stands for its first row)."""
    bounds = bucket_bounds(num_rows, num_clips)
    return np.stack([bounds[:-1], np.maximum(bounds[1:], bounds[:-1] + 1)], axis=1)


def middle_rows(num_rows, num_clips):
    """The row standing for each of ``num_clips`` buckets over ``num_rows`` rows: the row
    (b_k + b_{k+1}) // 2 of bucket bounds b_k (bucket_bounds)."""
    bounds = bucket_bounds(num_rows, num_clips)
    return (bounds[:-1] + bounds[1:]) // 2


class SampledClips(ClipInput):
    """``num_clips`` clips, each the middle row of its bucket."""

    def base(self, feats):
        feats = super().base(feats)
        return np.ascontiguousarray(feats[middle_rows(len(feats), self.num_clips)])

    def row_sources(self, num_rows):
        middle = middle_rows(num_rows, self.num_clips)
        return np.stack([middle, middle + 1], axis=1)


class NativeClips(ClipInput):
    """The rows at their own rate. A training item is a window of ``num_clips``
    consecutive rows starting at a random row (the first row when the video is
    not longer); an evaluation item is the whole video. Either is padded with
    zero rows to ``num_clips`` when shorter (``clip_counts`` keeps the real count).

    ``seconds_per_row`` (the config key ``unit_key`` sets it) is what the model
    takes a row to last; the datasets check it against their videos."""
    variable_length = True
    TOLERANCE = 0.25  # of the median seconds per row: real files differ from duration / rows by a row or two

    def __init__(self, num_clips, normalize=True, seconds_per_row=None, unit_key="the seconds per row",
                 longest_first=True):
        super().__init__(num_clips, normalize, longest_first)
        self.seconds_per_row, self.unit_key = seconds_per_row, unit_key

    def rate_problem(self, rows, durations):
        if not self.seconds_per_row or not len(rows):
            return None
        measured = float(np.median(np.asarray(durations, dtype=np.float64) / np.maximum(rows, 1)))
        if abs(measured / self.seconds_per_row - 1) <= self.TOLERANCE:
            return None
        return (f"its videos last {measured:.4g} s per feature row (median of duration / rows), but {self.unit_key} "
                f"is {self.seconds_per_row:.4g} s: moments would be placed at the wrong times; set {self.unit_key} "
                f"to the features' rate")

    def trained_seconds(self, duration):
        """A training item is a window of ``num_clips`` rows: that many rows' seconds (when the rate is known)."""
        return min(duration, self.num_clips * self.seconds_per_row) if self.seconds_per_row else duration

    def whole_seconds(self, duration):
        """All of it: evaluation reads a whole video at the rows' own rate, where a cell lasts what it
        lasted in a training window, as the references evaluate; only a video longer than every
        training video is windowed."""
        return duration

    def take(self, base, rng=None):
        total, start = len(base), 0
        if rng is not None and total > self.num_clips:
            start = int(rng.integers(total - self.num_clips))
            return base[start:start + self.num_clips], start, self.num_clips
        if total >= self.num_clips:
            return base, start, total
        padded = np.zeros((self.num_clips, base.shape[1]), dtype=base.dtype)
        padded[:total] = base
        return padded, start, total

    def row_sources(self, num_rows):
        """Each row its own; the zero rows padding a shorter video to ``num_clips`` come from none."""
        own = super().row_sources(num_rows)
        padding = np.full((max(self.num_clips - num_rows, 0), 2), num_rows)
        return np.concatenate([own, padding]).astype(np.int64)

    def describe(self):
        return f"NativeClips(windows of {self.num_clips}{'' if self.normalize else ', not normalised'})"
