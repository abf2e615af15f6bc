"""One item per query: prepared video features, the sentence (as the run's
text input encodes it) and the moment."""
import zlib
from collections import Counter, OrderedDict
from typing import NamedTuple

import numpy as np
import torch
from torch.utils.data import Dataset

from ..errors import TanError
from ..structures.ranked_windows import RankedDraw
from ..utils.logger import get_logger
from . import formats
from .features.clip_inputs import ClipInput, ResampledClips
from .features.sources import open_features
from .training_windows import ItemWindow, TrainingWindows
from .tokens import tokenize

# Why a video of the annotations is left out (each of its queries is counted under it).
MISSING_VIDEO = "video missing from the feature file"
NONFINITE_VIDEO = "video with NaN or infinite features"
EMPTY_VIDEO = "video with no feature rows"
NAMED_AT_MOST = 5  # videos named in a log line


def named(videos, most=NAMED_AT_MOST):
    """"a, b, c" of the first ``most`` of ``videos``, then how many more."""
    more = f" and {len(videos) - most} more" if len(videos) > most else ""
    return ", ".join(videos[:most]) + more


class FeatureSettings(NamedTuple):
    """Where a dataset's clip features are and how they are prepared: ``features`` (a path,
    or the list of concatenated streams) with ``feature_key``, rows of width ``input_size``
    (the config key ``input_size_key`` sets it) taken as ``clips`` says (a
    :class:`~tan.data.features.clip_inputs.ClipInput`, or a number of clips to resample to),
    at most ``cache_size`` videos kept in memory, streams' lengths within ``length_tolerance``;
    ``seed`` (SEED) draws the training windows of a clip input that has them, and those of
    ``train_windows`` (a tan.data.training_windows.TrainingWindows: INPUT.TRAIN_WINDOW, or None);
    ``ranked_windows`` (INPUT.TRAIN_WINDOW.RANKED_WINDOWS) for a clip input that trains on windows
    of its own rows, which ranks a query in windows of that many rows."""
    features: object
    feature_key: object
    clips: object
    input_size: int
    input_size_key: str
    cache_size: int
    length_tolerance: float
    seed: int = 0
    train_windows: object = None
    ranked_windows: int = 0


def as_clip_input(clips):
    """A ClipInput as it is, or a number of clips to resample to."""
    return clips if isinstance(clips, ClipInput) else ResampledClips(clips)


class MomentDataset(Dataset):
    """Queries of one annotation file over one feature source (an HDF5 file, a
    folder of per-video files, or several concatenated streams).

    Per-query data is kept in flat arrays (token ids share one buffer), and
    video features are read on demand with a small LRU cache, so a process
    never holds every video's features.
    """

    def __init__(self, name, parsed, features, vocabulary, source="", annotation_format=""):
        """``parsed``: the (queries, dropped) that ``load_annotations`` returned for the
        annotation file (``source`` names it in errors, ``annotation_format`` is its format: TEST.DETR_METRICS
        "auto" reads it); ``features``: a :class:`FeatureSettings`;
        ``vocabulary``: how sentences are encoded (the run's text input's encoder,
        tan/data/text/inputs.py)."""
        self.name = name
        self.source = source  # the annotation file, named where its queries are reported on
        self.clip_input = as_clip_input(features.clips)
        self.seed, self.name_key, self.train_windows = features.seed, zlib.crc32(name.encode()), features.train_windows
        self.ranked = features.ranked_windows
        self.vocabulary = vocabulary
        self.features = open_features(features.features, features.feature_key, features.length_tolerance)
        self.cache_size = features.cache_size
        self._cache = OrderedDict()
        input_size, input_size_key = features.input_size, features.input_size_key
        queries, dropped = parsed
        dropped = Counter(dropped)  # this dataset's own count: the caller's may be shared
        shapes = self.features.shapes(sorted({q.video for q in queries}))
        self._check_widths(shapes, input_size, input_size_key)

        nonfinite = self.features.nonfinite(v for v, s in shapes.items() if s[0] > 0)
        self.videos = sorted(v for v, s in shapes.items() if s[0] > 0 and v not in nonfinite)
        # The annotations' videos left out, by reason (their queries are counted in ``dropped``).
        self.videos_left_out = {reason: videos for reason, videos in (
            (MISSING_VIDEO, sorted({q.video for q in queries} - set(shapes))),
            (NONFINITE_VIDEO, sorted(nonfinite)),
            (EMPTY_VIDEO, sorted(v for v, s in shapes.items() if s[0] == 0))) if videos}
        kept, token_ids = self._keep_usable(queries, shapes, nonfinite, dropped)
        if not kept:
            raise TanError(f"dataset {name!r} ({source}) has no usable query after filtering: {dict(dropped)}")
        self.vocabulary.check_encoded(token_ids, name)

        video_index = {v: i for i, v in enumerate(self.videos)}
        self.video_rows = np.asarray([shapes[v][0] for v in self.videos], dtype=np.int64)  # feature rows per video
        self.video_ids = np.asarray([video_index[q.video] for q in kept], dtype=np.int32)
        self.moments = np.asarray([[q.start, q.end] for q in kept], dtype=np.float32)  # the first window
        # Every window [Q, W, 2], W the most of any query, padded with copies of the query's
        # first window (a copy changes no best-moment IoU); moment_counts [Q] the real numbers.
        self.moment_counts = np.asarray([len(q.moments) for q in kept], dtype=np.int32)
        self.gt_moments = np.repeat(self.moments[:, None, :], int(self.moment_counts.max()), axis=1)
        for row, q in enumerate(kept):
            self.gt_moments[row, :len(q.moments)] = q.moments
        self.durations = np.asarray([q.duration for q in kept], dtype=np.float32)
        self._check_rate(name, kept, shapes)
        self.sentences = [q.sentence for q in kept]
        self.qids = [q.qid_written if q.qid_written is not None else (q.qid or row) for row, q in enumerate(kept)]
        # QVHighlights' clip labels per query (None for a query without usable ones); None where no query has
        # any (highlight detection, docs/metric.md §6.2)
        self.saliency = [q.saliency for q in kept] if any(q.saliency is not None for q in kept) else None
        self.annotation_format = annotation_format
        # a split released without labels: evaluated into predictions and a submission file only
        self.labeled = all(q.labeled for q in kept)
        self.word_offsets = np.cumsum([0] + [len(t) for t in token_ids])
        self.word_ids = np.concatenate(token_ids)
        self.dropped = dropped
        self.unknown_words = sum(self.vocabulary.unknown_count(ids) for ids in token_ids)
        self._log_summary(len(kept), sum(len(ids) for ids in token_ids))

    def _check_widths(self, shapes, input_size, input_size_key):
        for video, shape in shapes.items():
            if len(shape) != 2 or shape[1] != input_size:
                raise TanError(f"dataset {self.name!r}: video {video!r} has features of shape {tuple(shape)} in "
                               f"{self.features!r}{self._stream_widths(video)}; expected [T, {input_size}] "
                               f"({input_size_key})")

    def _keep_usable(self, queries, shapes, nonfinite, dropped):
        """(kept queries, their token ids); what is left out is counted in ``dropped``."""
        usable_videos = set(self.videos)
        kept, token_ids = [], []
        for q in queries:
            if q.video not in shapes:
                dropped[MISSING_VIDEO] += 1
                continue
            if q.video in nonfinite:
                dropped[NONFINITE_VIDEO] += 1
                continue
            if q.video not in usable_videos:
                dropped[EMPTY_VIDEO] += 1
                continue
            if not tokenize(q.sentence):
                dropped["sentence without words"] += 1
                continue
            ids = self.vocabulary.encode_query(q)
            reason = self.vocabulary.drop_reason(ids)
            if reason:
                dropped[reason] += 1
                continue
            kept.append(q)
            token_ids.append(ids)
        return kept, token_ids

    def _check_rate(self, name, kept, shapes):
        """The clip input's view of the videos' seconds per row (a sliding window's time unit)."""
        duration = {q.video: q.duration for q in kept}
        problem = self.clip_input.rate_problem(np.asarray([shapes[v][0] for v in duration]),
                                               np.asarray(list(duration.values())))
        if problem:
            raise TanError(f"dataset {name!r}: {problem}")

    def _stream_widths(self, video):
        """", streams of width a + b" for concatenated features, to say which stream is off."""
        streams = getattr(self.features, "streams", None)
        if not streams:
            return ""
        widths = [s.shapes([video]).get(video, ("?", "?"))[-1] for s in streams]
        return f" (streams of width {' + '.join(map(str, widths))})"

    def _log_summary(self, kept, total_words):
        logger = get_logger("data")
        for reason, videos in self.videos_left_out.items():
            logger.warning("dataset %s: %d %s left out: %s", self.name, len(videos),
                           reason.replace("video ", "videos ", 1) if len(videos) > 1 else reason, named(videos))
        dropped, unknown = self.dropped, self.unknown_words
        words = self.vocabulary.coverage(unknown, total_words)
        logger.info(
            "dataset %s: %d queries over %d videos kept; %s; %s", self.name, kept, len(set(self.video_ids.tolist())),
            ("dropped or clipped: " + ", ".join(f"{k} {v}" for k, v in sorted(dropped.items()))) if dropped
            else "nothing dropped or clipped", words)

    def __len__(self):
        return len(self.video_ids)

    def video_features(self, video, window=None):
        """[P, D_in] float32: the video's rows as the model's clip input prepares them
        (by default L2-normalised and resampled to NUM_PRE_CLIPS); of a training ``window``
        (an ItemWindow), the window's rows prepared as a video of their own."""
        if window is not None:
            return self.clip_input.base(self.window_rows(video, window))
        return self._cached(video, lambda: self.clip_input.base(self.features.read(video)))

    def window_rows(self, video, window):
        """The raw rows of ``window`` (an ItemWindow) of ``video``: read alone from a source that reads
        rows (an HDF5 file: an hour-long movie is not read whole for a window of it), else cut from
        the whole video, kept in the cache."""
        if self.features.rows_alone(video):
            return self.features.read_rows(video, window.first, window.last)
        return self._cached(("rows", video), lambda: self.features.read(video))[window.first:window.last]

    def _cached(self, key, make):
        """What ``make()`` returns, kept in the LRU cache under ``key``."""
        value = self._cache.get(key)
        if value is None:
            value = make()
            if self.cache_size:
                self._cache[key] = value
                if len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        return value

    def item_window(self, index, epoch, rng_key=None):
        """The training window (an ItemWindow) that holds query ``index``'s first moment, drawn from
        (SEED, ``epoch``, the dataset, ``rng_key``: by default the query), or None: not a training
        item, no INPUT.TRAIN_WINDOW, or a video short enough to be taken whole."""
        duration = float(self.durations[index])
        if epoch is None or self.train_windows is None or not self.train_windows.applies_to(duration):
            return None
        key = index if rng_key is None else rng_key
        rng = np.random.default_rng([self.seed % 2 ** 32, epoch, self.name_key, key, 1])  # apart from take()'s
        rows = int(self.video_rows[self.video_ids[index]])
        start = self.train_windows.draw(rng, duration, self.moments[index], rows / duration)
        return ItemWindow.of(rows, duration, start, self.train_windows.length)

    def ranked_windows(self, index, epoch, rng_key=None):
        """The windows of query ``index``'s video that it is ranked in (a list of ItemWindow, the first
        holding its moment: INPUT.TRAIN_WINDOW.RANKED_WINDOWS), drawn as :meth:`item_window` draws, or None."""
        duration, rows = float(self.durations[index]), int(self.video_rows[self.video_ids[index]])
        windows = self.train_windows or self._own_windows(duration, rows)
        if epoch is None or windows is None or not windows.ranked or not windows.applies_to(duration):
            return None
        key = index if rng_key is None else rng_key
        rng = np.random.default_rng([self.seed % 2 ** 32, epoch, self.name_key, key, 2])  # apart from item_window's
        return windows.ranked_windows(rng, duration, rows, self.moments[index])

    def _own_windows(self, duration, rows):
        """For a clip input that trains on windows of its own rows (of a variable length), the ranking's
        windows: that many rows of a video with more (TrainingWindows in the video's seconds), else None."""
        size = getattr(self.clip_input, "num_clips", 0)
        if not (self.ranked and self.clip_input.variable_length and size and rows > size):
            return None
        return TrainingWindows(size * duration / rows, size * duration / rows, 0.0, self.ranked)

    def ranked_fields(self, index, windows, queries):
        """What an item brings of its ranked ``windows``: {"ranked": tan.structures.ranked_windows.RankedDraw} (their
        rows as the model takes a window, the rows on disk each of them comes from, their seconds in the
        video, the video, the moments of the item's sentences ``queries``), which
        tan.data.collate.collate_ranked joins."""
        video = self.videos[self.video_ids[index]]
        rows = [self.clip_input.take(self.video_features(video, w))[0] for w in windows]
        sources = [self.clip_input.row_sources(w.last - w.first) for w in windows]
        if len(sources[0]) != len(rows[0]):
            raise TanError(f"the clip input {self.clip_input!r} makes {len(rows[0])} rows of a window of "
                           f"{windows[0].last - windows[0].first}, and its row_sources says where {len(sources[0])} "
                           f"come from: training across windows (INPUT.TRAIN_WINDOW.RANKED_WINDOWS) needs each "
                           f"row's rows on disk to find a moment's rows in a window")
        return {"ranked": RankedDraw(
            feats=torch.from_numpy(np.stack(rows)), sources=torch.from_numpy(np.stack(sources)),
            raw_rows=torch.tensor([w.last - w.first for w in windows]),
            spans=torch.tensor([[w.start, w.end] for w in windows], dtype=torch.float64),
            video=(self.name_key, int(self.video_ids[index])),
            moments=torch.from_numpy(self.moments[np.asarray(queries)].astype(np.float64)))}

    @property
    def by_query(self):
        """The queries' dataset (this one; :class:`VideoGroups` answers with the dataset it groups)."""
        return self

    def query(self, index):
        """[L, E] word vectors, or [L] word-piece ids."""
        return self.vocabulary.lookup(self.word_ids[self.word_offsets[index]:self.word_offsets[index + 1]])

    def clips_of(self, index, epoch=None, window=None):
        """(rows, first clip, real rows) of query ``index``'s video, or of its training ``window``;
        ``epoch`` (a training item) draws the clip input's window from (SEED, epoch, the dataset,
        index), so a resumed run draws what an uninterrupted one would, in any worker."""
        base = self.video_features(self.videos[self.video_ids[index]], window)
        # the dataset's name in the key: datasets trained on together draw apart
        rng = None if epoch is None else np.random.default_rng([self.seed % 2 ** 32, epoch, self.name_key, index])
        return self.clip_input.take(base, rng)

    def __getitem__(self, key):
        index, epoch = key if isinstance(key, tuple) else (key, None)
        window = self.item_window(index, epoch)
        feats, first, count = self.clips_of(index, epoch, window)
        variable = {"clip_count": count, "clip_offset": first} if self.clip_input.variable_length else {}
        moment, gt_moments, duration = self.moments[index], self.gt_moments[index], float(self.durations[index])
        if window is not None:  # the moments in the window's seconds; the window is the item's video
            moment, gt_moments, duration = window.placed(moment), window.placed(gt_moments), window.duration
        ranked = self.ranked_windows(index, epoch)
        return {
            "feats": torch.from_numpy(feats),  # [P, D_in]
            **variable,
            **(self.ranked_fields(index, ranked, [index]) if ranked else {}),
            "query": torch.from_numpy(self.query(index)),  # [L, E]
            "moment": torch.from_numpy(moment),  # [2] seconds, the first window
            "gt_moments": torch.from_numpy(gt_moments),  # [W, 2] seconds, padded with the first
            "duration": duration,
            "index": index,
        }

    @classmethod
    def from_files(cls, name, annotations, features, fmt, vocabulary, clips, input_size, feature_key=None,
                   cache_size=32, durations=None, parsed=None, input_size_key="the model's input size",
                   length_tolerance=0.1):
        """The dataset of annotation file ``annotations`` (format ``fmt``, durations file ``durations``;
        parsed here unless ``parsed`` is given) over ``features``, taken as ``clips`` (a ClipInput
        or a number of clips to resample to)."""
        if parsed is None:
            parsed = formats.load_annotations(annotations, fmt, durations)
        settings = FeatureSettings(features, feature_key, clips, input_size, input_size_key, cache_size,
                                   length_tolerance)
        return cls(name, parsed, settings, vocabulary, source=annotations, annotation_format=fmt)

    def __getstate__(self):  # workers start with an empty cache
        state = dict(self.__dict__)
        state["_cache"] = OrderedDict()
        return state


