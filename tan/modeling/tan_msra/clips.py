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

from ...data.features.clip_inputs import ClipInput, bucket_rows


class AveragedClips(ClipInput):
    """``num_clips`` clips, each the torch float32 mean of its bucket of (normalised) rows."""

    def base(self, feats):
        """[T, C] rows -> [num_clips, C] float32, the reference's values bit for bit.

        The edges e_k = round(k / P * T) (P = ``num_clips``) are computed in float32
        tensors, k / P rounded before the product as its CPU datasets compute it, and
        clamped to T - 1: no clip averages the last row (an empty one may copy it).
        The rows before the last edge are cut at the inner edges, and each non-empty
        piece is reduced by its own torch ``mean`` over dim 0 (the very slice its code
        averages, hence the same float32 sums); an empty piece (e_k >= e_k+1) stands
        for row e_k.
        """
        rows = torch.from_numpy(np.ascontiguousarray(feats, dtype=np.float32))
        if self.normalize:
            rows = F.normalize(rows, dim=1)
        count = rows.shape[0]
        edges = torch.arange(self.num_clips + 1, dtype=torch.float32).div(self.num_clips).mul(count)
        edges = edges.round().long().clamp(max=count - 1).tolist()
        pieces = torch.tensor_split(rows[:edges[-1]], edges[1:-1])
        return torch.stack([piece.mean(dim=0) if len(piece) else rows[edge]
                            for piece, edge in zip(pieces, edges)]).numpy()

    def row_sources(self, num_rows):
        return bucket_rows(num_rows, self.num_clips)  # the same buckets
