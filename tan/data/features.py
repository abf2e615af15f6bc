"""Clip features from HDF5, prepared as docs/model.md §1 describes."""
import os

import h5py
import numpy as np

from ..errors import TanError
from ..utils.progress import progress


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


class FeatureFile:
    """Read-only access to one HDF5 feature file, opened lazily per process.

    Two layouts are read: a dataset per video id, or a group per video id
    holding a dataset named ``group_key`` (ActivityNet's ``c3d_features``).
    """

    def __init__(self, path, group_key="c3d_features"):
        if not os.path.isfile(path):
            raise TanError(f"feature file {path!r} not found")
        self.path = path
        self.group_key = group_key
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
            if self.group_key not in node:
                raise TanError(f"{self.path}: group {video!r} has no dataset {self.group_key!r}")
            node = node[self.group_key]
        return node

    def shapes(self, videos):
        """{video: (T, D)} for the videos present in the file."""
        handle = self._handle()
        return {v: self._node(v).shape for v in videos if v in handle}

    def nonfinite(self, videos):
        """The videos whose features hold NaN or infinite values (one pass over them)."""
        videos = list(videos)
        checked = progress(videos, total=len(videos), desc=f"checking {os.path.basename(self.path)}", unit="video")
        return {v for v in checked if not np.isfinite(self._node(v)[()]).all()}

    def read(self, video):
        return np.asarray(self._node(video)[()], dtype=np.float32)

    def __getstate__(self):  # picklable for spawned workers: reopen there
        state = dict(self.__dict__)
        state["_file"] = None
        state["_pid"] = None
        return state
