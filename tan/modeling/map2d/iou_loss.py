"""2D-TAN's training target and loss (docs/model.md §6), for any model whose cells
are scored against their IoU with the moment."""
from torch import nn
from torch.nn import functional as F

from ...structures.moments import best_moment_iou, cell_spans


class ScaledIoULoss(nn.Module):
    """BCE with logits against IoU rescaled to [0, 1], averaged over valid cells.

    The targets are computed on the logits' device from (start, end,
    duration), for the valid cells only, instead of being stored as an N x N
    map per query; the cells are picked by a fixed index, which (unlike a
    boolean mask) needs no host-device synchronisation."""

    def __init__(self, min_iou, max_iou, mask2d):
        super().__init__()
        self.min_iou, self.max_iou = min_iou, max_iou
        n = mask2d.shape[-1]
        i, j = mask2d.nonzero(as_tuple=True)
        self.register_buffer("mask2d", mask2d, persistent=False)
        self.register_buffer("cell_index", i * n + j, persistent=False)
        self.register_buffer("cell_bounds", cell_spans(i, j), persistent=False)  # clip units

    def targets(self, ious):
        return ((ious - self.min_iou) / (self.max_iou - self.min_iou)).clamp(0, 1)

    def forward(self, logits, gt_moments, durations):
        # logits: [B, N, N]; gt_moments: [B, W, 2], each query's ground-truth moments; durations: [B]
        n = logits.shape[-1]
        unit = durations.float()[:, None, None] / n
        candidates = self.cell_bounds[None] * unit  # [B, C, 2] seconds, as candidate_moments computes them
        ious = best_moment_iou(candidates, gt_moments.float()[:, None, :, :])  # the best moment's IoU per cell
        selected = logits.flatten(1).index_select(1, self.cell_index).float()
        return F.binary_cross_entropy_with_logits(selected, self.targets(ious))
