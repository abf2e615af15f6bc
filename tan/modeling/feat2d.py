"""The sparse 2D temporal map (docs/model.md §3).

Cell (i, j) holds the element-wise max over clips i..j. Instead of the
reference's chain of pooling layers, the maxima come from a sparse table:
level k holds the max of every window of 2**k clips, and the max over i..j
is the max of two (overlapping) level-k windows with 2**k <= j - i + 1. Max
is exact, so the result is bit-identical; the whole map is one gather and one
scatter.
"""
import torch
from torch import nn


def build_mask2d(num_clips, pooling_counts, device=None):
    """[N, N] bool: the diagonal, then the strided offsets of ``pooling_counts``."""
    n = num_clips
    mask = torch.zeros(n, n, dtype=torch.bool, device=device)
    idx = torch.arange(n, device=device)
    mask[idx, idx] = True
    stride, offset = 1, 0
    for count in pooling_counts:
        for _ in range(count):
            offset += stride
            starts = torch.arange(0, n - offset, stride, device=device)
            mask[starts, starts + offset] = True
        stride *= 2
    return mask


class SparseMaxPool2D(nn.Module):
    def __init__(self, num_clips, pooling_counts):
        super().__init__()
        n = num_clips
        mask2d = build_mask2d(n, pooling_counts)
        i, j = mask2d.nonzero(as_tuple=True)  # valid cells, row-major
        length = j - i + 1
        level = torch.tensor([m.bit_length() - 1 for m in length.tolist()])  # largest 2**k <= length
        self.num_clips = n
        self.num_levels = int(level.max().item()) + 1
        self.register_buffer("mask2d", mask2d, persistent=False)
        # positions in the flattened [levels * N] table of the two windows
        self.register_buffer("left", level * n + i, persistent=False)
        self.register_buffer("right", level * n + (j - 2 ** level + 1), persistent=False)
        self.register_buffer("cells", i * n + j, persistent=False)

    def forward(self, x):
        # x: [B, H, N]
        b, h, n = x.shape
        levels = [x]
        for k in range(1, self.num_levels):
            prev, w = levels[-1], 2 ** (k - 1)
            nxt = torch.maximum(prev[..., : n - w], prev[..., w:])  # windows of 2**k clips
            levels.append(nn.functional.pad(nxt, (0, n - nxt.shape[-1])))
        table = torch.cat(levels, dim=-1)  # [B, H, levels * N]
        values = torch.maximum(table[..., self.left], table[..., self.right])  # [B, H, C]
        map2d = x.new_zeros(b, h, n * n)
        map2d[..., self.cells] = values
        return map2d.view(b, h, n, n)  # [B, H, N, N]


def build_feat2d(cfg):
    return SparseMaxPool2D(cfg.MODEL.TAN.NUM_CLIPS, cfg.MODEL.TAN.FEAT2D.POOLING_COUNTS)
