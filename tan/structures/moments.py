"""Moment geometry: temporal IoU and the candidate moments of 2D-map cells.

Cell (i, j) of an N x N map stands for clips i..j, that is the span
[i, j + 1) in clip units, or [i * d / N, (j + 1) * d / N] seconds for a
video of d seconds (docs/model.md §6). The loss, the evaluation, the
prediction tools and the data tools all use these definitions.
"""
import torch


def temporal_iou(a, b):
    """IoU of moments ``a`` [..., 2] and ``b`` [..., 2] (broadcast); 0 where the union is empty."""
    inter = (torch.minimum(a[..., 1], b[..., 1]) - torch.maximum(a[..., 0], b[..., 0])).clamp(min=0)
    union = torch.maximum(a[..., 1], b[..., 1]) - torch.minimum(a[..., 0], b[..., 0])
    return torch.where(union > 0, inter / union.clamp(min=1e-12), torch.zeros_like(inter))


def best_moment_iou(moments, gt_moments):
    """IoU of moments [..., 2] with the best of each query's ground-truth moments [..., W, 2] (broadcast over the
    leading dimensions): a query with several ground-truth moments is answered by any of them
    (docs/data.md §9.2). With W = 1 this is :func:`temporal_iou`, bit for bit."""
    return temporal_iou(moments[..., None, :], gt_moments).amax(dim=-1)


def cell_spans(rows, cols):
    """[C, 2] float: the spans of cells (rows[c], cols[c]) in clip units, [i, j + 1)."""
    return torch.stack([rows, cols + 1], dim=1).float()


def cell_seconds(spans, durations, num_clips):
    """[B, C, 2] float32 seconds of the spans [C, 2] (clip units) for videos of ``durations`` [B] seconds.

    The reference evaluation's arithmetic (docs/metric.md §1): float32
    ``(bound * d) / N``, the product rounded first, then a true division.
    The divisor is a tensor on purpose: CUDA divides by a Python number as a
    multiplication by its reciprocal, which rounds differently.
    """
    d = durations.float()[:, None, None]
    return (spans.float()[None] * d) / torch.tensor(float(num_clips), device=d.device)


def candidate_moments(num_clips, durations):
    """[B, N, N, 2] start and end (seconds) of every cell's candidate moment."""
    grid = torch.arange(num_clips, device=durations.device, dtype=durations.dtype)
    unit = durations[:, None] / num_clips  # [B, 1]
    starts = (grid * unit)[:, :, None].expand(-1, -1, num_clips)
    ends = ((grid + 1) * unit)[:, None, :].expand(-1, num_clips, -1)
    return torch.stack([starts, ends], dim=-1)


def iou2d(moments, durations, num_clips):
    """[B, N, N] IoU of each cell's candidate with the ground truth [B, 2] (seconds)."""
    return temporal_iou(candidate_moments(num_clips, durations), moments[:, None, None, :])
