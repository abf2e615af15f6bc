"""Where a dataset's clip features come from (docs/data.md §3): an HDF5 file
(either layout), a folder of per-video ``.npy`` / ``.npz`` files, or several
such streams concatenated along the channel axis.

Every source answers the same questions: which videos it holds, their
shapes (read from file headers, not from the data), a video's [T, D]
float32 array, and which videos hold NaN or infinite values. A single
stream also gives a video's array in the dtype it is stored in
(``read_stored``, for tan-convert-features). Sources open files lazily and
are picklable, so loader workers reopen them.
"""
import os

import h5py
import numpy as np

from ...errors import TanError
from ...utils.progress import progress
from .array_files import array_shape, key_setting, list_array_files, read_stored_array
from .rows import l2_normalize_rows, resample

HDF5_GROUP_KEY = "c3d_features"  # ActivityNet's dataset name inside a video's group
NPZ_KEY = "features"  # the array of a video's .npz (Moment-DETR / lighthouse)


class _FileSource:
    """What the HDF5 and folder sources share: a path, the array's key (``key_field``
    names what sets it, in errors: a catalog field or a command-line option), and
    float32 reads of the stored arrays."""

    kind = ""
    default_key = ""

    def __init__(self, path, key=None, key_field="feature_key"):
        self.path = path
        self.key = key or self.default_key
        self.key_field = key_field

    def __repr__(self):
        return f"{self.kind} {self.path!r}"

    # Whether read_rows reads only the rows asked (a training window of an hour-long movie), so that
    # the datasets need not keep whole videos in memory to cut windows from them.
    reads_rows = False

    def rows_alone(self, video):
        """Whether :meth:`read_rows` of ``video`` reads its rows alone, not the whole video."""
        return self.reads_rows

    def read(self, video):
        return np.asarray(self.read_stored(video), dtype=np.float32)

    def read_rows(self, video, first, last):
        """float32 rows [first, last) of ``video``."""
        return self.read(video)[first:last]

    def nonfinite(self, videos):
        return _nonfinite(self, videos)


class HDF5Features(_FileSource):
    """Read-only access to one HDF5 feature file, opened lazily per process.

    Two layouts are read: a dataset per video id, or a group per video id
    holding a dataset named ``key`` (ActivityNet's ``c3d_features``).
    ``key_field`` names what sets the key in errors: a catalog field, or a
    command-line option ("--key").
    """

    kind = "HDF5 file"
    default_key = HDF5_GROUP_KEY

    def __init__(self, path, key=None, key_field="feature_key"):
        if not os.path.isfile(path):
            raise TanError(f"feature file {path!r} not found")
        try:
            is_hdf5 = h5py.is_hdf5(path)
        except OSError as e:
            raise TanError(f"feature file {path!r} cannot be read: {e.strerror or e}") from None
        if not is_hdf5:
            raise TanError(f"feature file {path!r} is not an HDF5 file; features are an HDF5 file, a folder of "
                           f"per-video .npy / .npz files, or (for one video) a .npy or .npz file")
        super().__init__(path, key, key_field)
        self._file = None
        self._pid = None

    def _handle(self):
        # A handle opened before a fork must not be shared with loader workers.
        if self._file is None or self._pid != os.getpid():
            try:
                self._file = h5py.File(self.path, "r")
            except OSError as e:
                raise TanError(f"feature file {self.path!r} cannot be read as HDF5: {e}") from None
            self._pid = os.getpid()
        return self._file

    def _node(self, video):
        node = self._handle()[video]
        if isinstance(node, h5py.Group):
            if self.key not in node:
                raise TanError(f"{self.path}: group {video!r} has no dataset {self.key!r} (the feature key: "
                               f"{key_setting(self.key_field)}); it holds {sorted(node)}")
            node = node[self.key]
        return node

    def videos(self):
        """Every video id of the file."""
        return set(self._handle().keys())

    def grouped(self):
        """True when videos are groups holding a dataset named ``key`` (ActivityNet's
        layout): any one is (a file that mixes the layouts is read either way)."""
        return any(isinstance(node, h5py.Group) for node in self._handle().values())

    def shapes(self, videos):
        """{video: (T, D)} for the videos present in the file."""
        handle = self._handle()
        return {v: tuple(self._node(v).shape) for v in videos if v in handle}

    def read_stored(self, video):
        """The array of ``video`` in the dtype it is stored in."""
        return self._node(video)[()]

    reads_rows = True

    def read_rows(self, video, first, last):
        """float32 rows [first, last) of ``video``, read from the file alone (HDF5 reads a slice)."""
        return np.asarray(self._node(video)[first:last], dtype=np.float32)

    def close(self):
        """Closes the file (the next read opens it again)."""
        if self._file is not None and self._pid == os.getpid():
            self._file.close()
        self._file = None

    def __getstate__(self):  # picklable for spawned workers: reopen there
        state = dict(self.__dict__)
        state["_file"] = None
        state["_pid"] = None
        return state


class FolderFeatures(_FileSource):
    """A folder of one file per video: ``{video}.npy`` holding the [T, D]
    array, or ``{video}.npz`` holding it under ``key`` (``features`` by
    default, as Moment-DETR and lighthouse write them). Any float dtype is
    read as float32. ``key_field``: as for HDF5Features."""

    kind = "folder"
    default_key = NPZ_KEY

    def __init__(self, path, key=None, key_field="feature_key"):
        if not os.path.isdir(path):
            raise TanError(f"feature folder {path!r} not found")
        super().__init__(path, key, key_field)
        self._files = None

    def files(self):
        """{video: file path}, from one listing of the folder."""
        if self._files is None:
            self._files = list_array_files(self.path, "feature folder")
        return self._files

    def videos(self):
        return set(self.files())

    def formats(self):
        """The file formats of the folder: a frozenset of "npy" and "npz"."""
        return frozenset(os.path.splitext(path)[1][1:] for path in self.files().values())

    def shape(self, video):
        """(T, D) of ``video`` from its file's header."""
        return array_shape(self.files()[video], self.key, self.key_field)

    def shapes(self, videos):
        files = self.files()
        return {v: self.shape(v) for v in videos if v in files}

    def read_stored(self, video):
        """The array of ``video`` in the dtype it is stored in."""
        return read_stored_array(self.files()[video], self.key, self.key_field)

    def close(self):
        """Nothing to close: each read opens and closes its file."""


class ConcatenatedFeatures:
    """Several streams of one dataset (say CLIP and SlowFast), joined along the
    channel axis. Each stream's rows are L2-normalised on their own, so that
    no stream outweighs another by its scale; streams of different lengths
    are resampled to the longest one's length over the same span of the
    video. Lengths that differ by more than ``tolerance`` of the longest
    (and more than 2 rows) are an error: they mean different videos or a
    truncated file, not a different rounding of the same clips."""

    kind = "streams"

    def __init__(self, streams, tolerance):
        self.streams = list(streams)
        self.tolerance = tolerance

    def __repr__(self):
        return " + ".join(repr(s) for s in self.streams)

    @property
    def path(self):
        return " + ".join(s.path for s in self.streams)

    def videos(self):
        return set.intersection(*(s.videos() for s in self.streams))

    def stream_shapes(self, videos):
        """[{video: (T, D)}] per stream."""
        return [s.shapes(videos) for s in self.streams]


    def shapes(self, videos):
        """{video: (T_max, sum of D)} for the videos every stream holds; an error
        for a video whose streams' lengths disagree (INPUT.FEATURE_LENGTH_TOLERANCE)."""
        per_stream = self.stream_shapes(list(videos))
        shapes = {}
        for video in sorted(set.intersection(*(set(s) for s in per_stream))):  # the first bad video, always the same
            stream = [s[video] for s in per_stream]
            malformed = next((shape for shape in stream if len(shape) != 2), None)
            if malformed is not None:  # the caller's shape check names it
                shapes[video] = malformed
                continue
            lengths = [shape[0] for shape in stream]
            if min(lengths) == 0:  # dropped as "video with no feature rows", as for one source
                shapes[video] = (0, sum(shape[1] for shape in stream))
                continue
            if not stream_lengths_agree(lengths, self.tolerance):
                raise TanError(f"video {video!r}: its feature streams have {', '.join(map(str, lengths))} rows "
                               f"({self!r}); they differ by more than INPUT.FEATURE_LENGTH_TOLERANCE = "
                               f"{self.tolerance} of the longest, so they cannot be the same clips of one video")
            shapes[video] = (max(lengths), sum(shape[1] for shape in stream))
        return shapes

    def read(self, video):
        return join_streams([s.read(video) for s in self.streams])

    def rows_alone(self, video):
        """Whether every stream reads rows alone and has the same rows for ``video`` (each row is then
        normalised on its own; streams of different lengths are resampled over the whole video)."""
        return (all(s.reads_rows for s in self.streams)
                and len({s.shapes([video])[video][0] for s in self.streams}) == 1)

    def read_rows(self, video, first, last):
        """Rows [first, last) of the joined streams: read alone where :meth:`rows_alone`, else cut from
        the whole joined video."""
        if not self.rows_alone(video):
            return self.read(video)[first:last]
        return join_streams([s.read_rows(video, first, last) for s in self.streams])

    def nonfinite(self, videos):
        videos = list(videos)
        return set().union(*(s.nonfinite(videos) for s in self.streams))


def join_streams(arrays):
    """One video's streams ([T_i, D_i] arrays) as the datasets join them: each L2-normalised per
    row, the shorter resampled to the longest's length, concatenated in order."""
    arrays = [l2_normalize_rows(a) for a in arrays]
    length = max(len(a) for a in arrays)
    if min(len(a) for a in arrays) == 0:
        return np.zeros((0, sum(a.shape[1] for a in arrays)), dtype=np.float32)
    return np.concatenate([a if len(a) == length else resample(a, length) for a in arrays], axis=1)


def stream_lengths_agree(lengths, tolerance, slack_rows=2):
    """Whether streams of these lengths can be the same clips of one video: within ``slack_rows``
    of each other (extractors round the clip count differently), or within ``tolerance`` of the longest."""
    longest, shortest = max(lengths), min(lengths)
    return longest - shortest <= max(slack_rows, tolerance * longest)


def _nonfinite(source, videos):
    """The videos whose features hold NaN or infinite values (one pass over them)."""
    videos = list(videos)
    checked = progress(videos, total=len(videos), desc=f"checking {os.path.basename(source.path)}", unit="video")
    return {v for v in checked if not np.isfinite(source.read(v)).all()}


def open_source(path, key=None, key_field="feature_key"):
    """One stream: a folder of per-video files, or an HDF5 file."""
    if os.path.isdir(path):
        return FolderFeatures(path, key, key_field)
    if not os.path.exists(path):
        raise TanError(f"feature file or folder {path!r} not found")
    return HDF5Features(path, key, key_field)


def streams_of(paths, keys=None):
    """[(path, key)] of a catalog entry's features: ``paths`` one path or a list of
    them (streams, concatenated in that order); ``keys`` the array key of each
    (one for all, a list of one per path, or None for the defaults)."""
    paths = [paths] if isinstance(paths, str) else list(paths)
    if not paths:
        raise TanError("no feature file or folder given")
    if keys is None or isinstance(keys, str):
        keys = [keys] * len(paths)
    if len(keys) != len(paths):
        raise TanError(f"feature_key has {len(keys)} entries for {len(paths)} feature streams; give one key, "
                       f"or one per stream")
    return list(zip(paths, keys))


def open_features(paths, keys=None, tolerance=0.1):
    """The feature source of a catalog entry (:func:`streams_of`): one source, or its streams joined."""
    sources = [open_source(p, k) for p, k in streams_of(paths, keys)]
    return sources[0] if len(sources) == 1 else ConcatenatedFeatures(sources, tolerance)
