"""The reference's feature preparation as a clip input (tan.data.features.clip_inputs).

Its datasets L2-normalise every row (torch's F.normalize, when
DATASET.NORMALIZE) and average the rows into NUM_SAMPLE_CLIPS clips
(average_to_fixed_length). The buckets are those of tan's ResampledClips
(bounds round(k T / P) in float32, clamped to T - 1; an empty bucket takes its
first row), but the arithmetic is not: tan normalises in numpy and averages
through a float64 running sum, the reference normalises in torch and takes
each bucket's torch float32 mean. The two differ in the last bits of about
every value (docs/tan_msra.md §3); :class:`AveragedClips` computes the
reference's, with its operations.
"""
import numpy as np
import torch
from torch.nn import functional as F

from ...data.features.clip_inputs import ClipInput


class AveragedClips(ClipInput):
    """``num_clips`` clips, each the torch float32 mean of its bucket of (normalised) rows."""

    def base(self, feats):
        rows = torch.from_numpy(np.ascontiguousarray(feats, dtype=np.float32))
        if self.normalize:
            rows = F.normalize(rows, dim=1)
        total = rows.shape[0]
        bounds = torch.arange(0, self.num_clips + 1, 1.0) / self.num_clips * total
        bounds = torch.clamp(torch.round(bounds).long(), max=total - 1).tolist()
        clips = [rows[start] if start >= end else rows[start:end].mean(dim=0)
                 for start, end in zip(bounds[:-1], bounds[1:])]
        return torch.stack(clips).numpy()

    def take(self, base, rng=None):
        return base, 0, len(base)
