"""MS-2D-TAN's clip inputs (docs/ms2dtan.md §7.1): tan's sliding windows and sampled
rows, with its rows normalised by torch's F.normalize, as its loader normalises them
(numpy's division rounds differently in a third of the values), and its test order,
the longest videos first, for both (its loader sorts every split by duration)."""
import numpy as np
import torch
from torch.nn import functional as F

from ...data.features.clip_inputs import NativeClips, SampledClips


def torch_normalized(feats):
    """Rows [T, D] divided by their L2 norm (at least 1e-12) as F.normalize computes it."""
    return F.normalize(torch.from_numpy(np.ascontiguousarray(feats)), dim=1).numpy()


class WindowClips(NativeClips):
    def normalized(self, feats):
        return torch_normalized(feats)


class MiddleRowClips(SampledClips):
    def normalized(self, feats):
        return torch_normalized(feats)
