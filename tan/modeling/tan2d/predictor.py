"""Stacked masked 2D convolutions that score every cell (docs/model.md §5)."""
import torch
from torch import nn
from torch.nn import functional as F

from ..map2d.strips import build_weight_maps, needed_cells, strip_conv, strip_plan


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
