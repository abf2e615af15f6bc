"""Stacked masked 2D convolutions that score every cell (docs/model.md §5)."""
import torch
from torch import nn
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


class ProposalConv(nn.Module):
    """``strip_rows`` > 0 computes each conv only on row strips that cover the
    cells the valid outputs depend on (about half of the dense work for the
    reference settings). The valid cells' logits and all gradients are those of
    the dense stack (up to the order of float sums); other cells of the
    returned logits are not meaningful, as in the reference they are masked."""

    def __init__(self, input_size, hidden_size, kernel_size, num_stack_layers, mask2d, strip_rows=0):
        super().__init__()
        self.padding = (kernel_size - 1) * num_stack_layers // 2
        self.kernel_size = kernel_size
        convs = [nn.Conv2d(input_size, hidden_size, kernel_size, padding=self.padding)]
        convs += [nn.Conv2d(hidden_size, hidden_size, kernel_size) for _ in range(num_stack_layers - 1)]
        self.convs = nn.ModuleList(convs)
        self.pred = nn.Conv2d(hidden_size, 1, 1)
        weight_maps = build_weight_maps(mask2d, kernel_size, num_stack_layers)
        for index, weight in enumerate(weight_maps):
            self.register_buffer(f"weight_map_{index}", weight, persistent=False)
        self.plans = None
        if strip_rows > 0:
            self.plans = [strip_plan(n, strip_rows) for n in needed_cells(mask2d, weight_maps, kernel_size)]

    def forward(self, x):
        # x: [B, H, N, N]
        if self.plans is not None:
            x = F.pad(x, [self.padding] * 4)
        for index, conv in enumerate(self.convs):
            weight = getattr(self, f"weight_map_{index}")
            if self.plans is None:
                x = conv(x)
            else:
                x = strip_conv(conv, x, self.plans[index], weight.shape[-1])
            x = x.relu() * weight.to(x.dtype)  # stay in the autocast dtype (a float32 map would promote)
        # The 1 x 1 scoring conv runs in float32 under mixed precision: bf16
        # logits (8 significant bits) would tie many candidates and blur the ranking.
        with torch.autocast(x.device.type, enabled=False):
            return self.pred(x.to(self.pred.weight.dtype)).squeeze(1)  # [B, N, N], batch kept for B = 1


def build_predictor(cfg, mask2d):
    tan = cfg.MODEL.TAN
    return ProposalConv(tan.FEATPOOL.HIDDEN_SIZE, tan.PREDICTOR.HIDDEN_SIZE, tan.PREDICTOR.KERNEL_SIZE,
                        tan.PREDICTOR.NUM_STACK_LAYERS, mask2d, tan.PREDICTOR.STRIP_ROWS)
