"""Stacked masked 2D convolutions that score every cell (MODEL.md 2.4)."""
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


class ProposalConv(nn.Module):
    def __init__(self, input_size, hidden_size, kernel_size, num_stack_layers, mask2d):
        super().__init__()
        padding = (kernel_size - 1) * num_stack_layers // 2
        convs = [nn.Conv2d(input_size, hidden_size, kernel_size, padding=padding)]
        convs += [nn.Conv2d(hidden_size, hidden_size, kernel_size) for _ in range(num_stack_layers - 1)]
        self.convs = nn.ModuleList(convs)
        self.pred = nn.Conv2d(hidden_size, 1, 1)
        for index, weight in enumerate(build_weight_maps(mask2d, kernel_size, num_stack_layers)):
            self.register_buffer(f"weight_map_{index}", weight, persistent=False)

    def forward(self, x):
        # x: [B, H, N, N]
        for index, conv in enumerate(self.convs):
            x = conv(x).relu() * getattr(self, f"weight_map_{index}")
        return self.pred(x).squeeze(1)  # [B, N, N], batch kept for B = 1


def build_predictor(cfg, mask2d):
    tan = cfg.MODEL.TAN
    return ProposalConv(tan.FEATPOOL.HIDDEN_SIZE, tan.PREDICTOR.HIDDEN_SIZE, tan.PREDICTOR.KERNEL_SIZE,
                        tan.PREDICTOR.NUM_STACK_LAYERS, mask2d)
