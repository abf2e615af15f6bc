"""Row strips: the 2D convolutions of a proposal stack computed only where a
valid output depends on them (docs/model.md §5; MODEL.{NAME}.PREDICTOR.STRIP_ROWS).

The weight maps scale each conv's output by 1 / (number of contributing
valid cells); the needed cells of a layer are those a valid final cell
depends on; a strip plan covers them with row strips, each with the column
range it needs.
"""
import torch
from torch.nn import functional as F


def _reciprocal_nonzero(counts):
    return torch.where(counts > 0, 1.0 / counts.clamp(min=1), torch.zeros_like(counts))


def build_weight_maps(mask2d, kernel_size, num_stack_layers):
    """S maps: conv l's output is multiplied by map l (1 / number of contributing valid cells)."""
    ones = torch.ones(1, 1, kernel_size, kernel_size, device=mask2d.device)
    padding = (kernel_size - 1) * num_stack_layers // 2
    counts = F.conv2d(mask2d[None, None].float(), ones, padding=padding)
    maps = [_reciprocal_nonzero(counts)]
    for _ in range(num_stack_layers - 1):
        counts = F.conv2d((maps[-1] > 0).float(), ones)
        maps.append(_reciprocal_nonzero(counts))
    # Each map has the size of its conv's output; the last is N x N.
    return [m[0, 0] for m in maps]


def needed_cells(mask2d, weight_maps, kernel_size):
    """Per conv layer, the output cells that a valid final cell depends on.

    Working back from the valid cells of the last layer, a cell of layer l is
    needed when it lies in the K x K window of a needed cell of layer l + 1
    and its weight is non-zero (a zero weight makes the activation zero).
    Everything else only feeds cells that the loss and the scores ignore.
    """
    ones = torch.ones(1, 1, kernel_size, kernel_size)
    needed = [mask2d.cpu().bool()]
    for weight in reversed(weight_maps[:-1]):
        window = F.conv_transpose2d(needed[0].float()[None, None], ones)[0, 0] > 0
        needed.insert(0, window & (weight.cpu() > 0))
    return needed


def strip_plan(needed, strip_rows):
    """Cover a layer's needed cells by row strips, each with the column range it needs."""
    plan = []
    size = needed.shape[0]
    for r0 in range(0, size, strip_rows):
        r1 = min(r0 + strip_rows, size)
        cols = needed[r0:r1].any(dim=0).nonzero().flatten()
        if len(cols):
            plan.append((r0, r1, int(cols.min()), int(cols.max()) + 1))
    return plan


def strip_conv(conv, x, plan, size):
    """``conv`` (no padding; ``x`` padded already) computed only on the strips of
    ``plan``: [B, C_out, size, size], zero outside them."""
    k = conv.kernel_size[0]
    out = None
    for r0, r1, c0, c1 in plan:
        piece = F.conv2d(x[:, :, r0:r1 + k - 1, c0:c1 + k - 1], conv.weight, conv.bias)
        if out is None:  # the conv's output dtype: bf16/fp16 under autocast
            out = piece.new_zeros(x.shape[0], conv.out_channels, size, size)
        out[:, :, r0:r1, c0:c1] = piece
    return out
