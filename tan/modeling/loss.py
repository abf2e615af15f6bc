"""Training target and loss (MODEL.md 3)."""
import torch
from torch import nn
from torch.nn import functional as F


def candidate_moments(num_clips, durations):
    """[B, N, N, 2] start and end (seconds) of every cell's candidate moment."""
    grid = torch.arange(num_clips, device=durations.device, dtype=durations.dtype)
    unit = durations[:, None] / num_clips  # [B, 1]
    starts = (grid * unit)[:, :, None].expand(-1, -1, num_clips)
    ends = ((grid + 1) * unit)[:, None, :].expand(-1, num_clips, -1)
    return torch.stack([starts, ends], dim=-1)


def temporal_iou(a, b):
    """IoU of moments ``a`` [..., 2] and ``b`` [..., 2] (broadcast)."""
    inter = (torch.minimum(a[..., 1], b[..., 1]) - torch.maximum(a[..., 0], b[..., 0])).clamp(min=0)
    union = torch.maximum(a[..., 1], b[..., 1]) - torch.minimum(a[..., 0], b[..., 0])
    return torch.where(union > 0, inter / union.clamp(min=1e-12), torch.zeros_like(inter))


def iou2d(moments, durations, num_clips):
    """[B, N, N] IoU of each cell's candidate with the ground truth [B, 2] (seconds)."""
    return temporal_iou(candidate_moments(num_clips, durations), moments[:, None, None, :])


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
        self.register_buffer("cell_bounds", torch.stack([i, j + 1], dim=1).float(), persistent=False)  # clip units

    def targets(self, ious):
        return ((ious - self.min_iou) / (self.max_iou - self.min_iou)).clamp(0, 1)

    def forward(self, logits, moments, durations):
        # logits: [B, N, N]; moments: [B, 2]; durations: [B]
        n = logits.shape[-1]
        unit = durations.float()[:, None, None] / n
        candidates = self.cell_bounds[None] * unit  # [B, C, 2] seconds, as candidate_moments computes them
        ious = temporal_iou(candidates, moments.float()[:, None, :])
        selected = logits.flatten(1).index_select(1, self.cell_index).float()
        return F.binary_cross_entropy_with_logits(selected, self.targets(ious))


def build_loss(cfg, mask2d):
    return ScaledIoULoss(cfg.MODEL.TAN.LOSS.MIN_IOU, cfg.MODEL.TAN.LOSS.MAX_IOU, mask2d)
