"""The sparse 2D temporal map (docs/model.md §3): FEAT2D.NAME "pool" or "conv".

"pool": cell (i, j) holds the element-wise max over clips i..j. Instead of the
reference's chain of pooling layers, the maxima come from a sparse table:
level k holds the max of every window of 2**k clips, and the max over i..j
is the max of two (overlapping) level-k windows with 2**k <= j - i + 1. Max
is exact, so the result is bit-identical; the whole map is one gather and one
scatter.

"conv": cell (i, i + offset) is a learned function of the clips it spans,
built by a chain of 1D convolutions as the pool map's chain of max-pools
would be (kernel 2 stride 1 within a group, kernel 3 stride 2 where the stride
doubles), so the two maps sample the same cells (docs/model.md §3.2).
"""
import torch
from torch import nn

from ...config.architecture import model_settings
from .band import take
from .ordered_sums import accumulate


def diagonal_steps(num_clips, pooling_counts):
    """Per diagonal of the map after the main one, in the order the chain fills
    them: (kernel, stride of the step, its starting rows, its offset). The
    stride doubles with each group of POOLING_COUNTS, so the step into a new
    group takes kernel 3 and stride 2, the others kernel 2 and stride 1."""
    steps, stride, offset = [], 1, 0
    for group, count in enumerate(pooling_counts):
        for step in range(count):
            offset += stride
            kernel, step_stride = (3, 2) if group > 0 and step == 0 else (2, 1)
            steps.append((kernel, step_stride, torch.arange(0, num_clips - offset, stride), offset))
        stride *= 2
    return steps


def build_mask2d(num_clips, pooling_counts, device=None):
    """[N, N] bool: the diagonal, then the strided offsets of ``pooling_counts``."""
    n = num_clips
    mask = torch.zeros(n, n, dtype=torch.bool)
    idx = torch.arange(n)
    mask[idx, idx] = True
    for _, _, starts, offset in diagonal_steps(n, pooling_counts):
        mask[starts, starts + offset] = True
    return mask.to(device) if device is not None else mask


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
        values = PairMax.apply(table, self.left, self.right)  # [B, H, C]
        map2d = x.new_zeros(b, h, n * n)
        map2d[..., self.cells] = values
        return map2d.view(b, h, n, n)  # [B, H, N, N]


class PairMax(torch.autograd.Function):
    """torch.maximum(table[..., left], table[..., right]) that keeps for its backward which of
    the two windows is larger (one byte per value) instead of both. The gradient is
    autograd's for the indexing and the maximum: to the larger, halved between the two on
    a tie, summed into the table in the same order (bit for bit in float32 and float64; in
    bfloat16 a table entry's terms are summed in float32 and rounded once, where autograd
    rounds after each addition).

    The sums add each table entry's terms in a fixed order on every device
    (:mod:`.ordered_sums`: on the CPU a scatter-add, one row per thread). Autograd's own
    backward of ``table[..., left]`` (index_put_ with accumulation) adds float32 terms on
    the CPU with atomic additions from several threads, in an order that depends on which
    thread gets there first wherever the threads' shares of the work split a row: two runs
    then differ in the last bits (docs/training.md, "Repeatability on a CPU")."""

    @staticmethod
    def forward(ctx, table, left, right):
        a, b = take(table, left), take(table, right)
        if ctx.needs_input_grad[0]:  # nothing to keep in inference
            ctx.save_for_backward((a > b).to(torch.int8) - (a < b).to(torch.int8), left, right)
            ctx.table_shape = table.shape
        return torch.maximum(a, b)

    @staticmethod
    def backward(ctx, grad):
        order, left, right = ctx.saved_tensors
        shared = torch.where(order == 0, grad / 2, grad)
        # Each window's gradient into a table of its own, then their sum: what autograd does
        # for a tensor indexed twice (so the result is bit for bit the single-threaded one).
        return (put_back(shared.masked_fill(order < 0, 0), left, ctx.table_shape)
                + put_back(shared.masked_fill(order > 0, 0), right, ctx.table_shape)), None, None


def put_back(grad, index, shape):
    """The gradient of ``take(x, index)`` for an ``x`` of ``shape``: ``grad`` [B, H, K] summed
    into zeros [B, H, L] at ``index`` [K] of the last dimension, in the order of ``index``."""
    return accumulate(grad.new_zeros(shape), -1, index, grad)


class SparseConv2D(nn.Module):
    """The convolutional map: cell (i, i) is clip i; each further diagonal is a
    1D convolution of the one before (``convs.{d}``: H -> H channels, no
    activation). The diagonals are gathered and written into the map in one
    scatter rather than one indexed write each."""

    def __init__(self, num_clips, pooling_counts, hidden_size):
        super().__init__()
        n = num_clips
        steps = diagonal_steps(n, pooling_counts)
        self.convs = nn.ModuleList(nn.Conv1d(hidden_size, hidden_size, kernel, stride)
                                   for kernel, stride, _, _ in steps)
        self.lengths = [len(starts) for _, _, starts, _ in steps]
        cells = [torch.arange(n) * (n + 1)] + [starts * n + starts + offset for _, _, starts, offset in steps]
        self.register_buffer("mask2d", build_mask2d(n, pooling_counts), persistent=False)
        self.register_buffer("cells", torch.cat(cells), persistent=False)

    def forward(self, x):
        # x: [B, H, N]
        b, h, n = x.shape
        diagonals = [x]
        for conv, length in zip(self.convs, self.lengths):
            x = conv(x)
            diagonals.append(x[..., :length])
        map2d = x.new_zeros(b, h, n * n)
        map2d[..., self.cells] = torch.cat(diagonals, dim=-1).to(map2d.dtype)
        return map2d.view(b, h, n, n)  # [B, H, N, N]


def build_feat2d(cfg):
    """The map of MODEL.{ARCHITECTURE}.FEAT2D (NAME "pool" or "conv")."""
    arch = model_settings(cfg)
    if arch.FEAT2D.NAME == "conv":
        return SparseConv2D(arch.NUM_CLIPS, arch.FEAT2D.POOLING_COUNTS, arch.FEATPOOL.HIDDEN_SIZE)
    return SparseMaxPool2D(arch.NUM_CLIPS, arch.FEAT2D.POOLING_COUNTS)
