"""The convolutions over each fused map and the scoring head (docs/ms2dtan.md §5)."""
import torch
from torch import nn


class GatedMapConv(nn.Module):
    """Each layer: relu(conv(x)) times sigmoid(gate(x)), a one-channel gate conv. No mask
    between layers, as the reference: cells past a video's end take part."""

    def __init__(self, input_size, hidden_sizes, kernel_sizes, paddings):
        super().__init__()
        inputs = [input_size] + list(hidden_sizes[:-1])
        self.blocks = nn.ModuleList(nn.ModuleList([nn.Conv2d(i, o, k, 1, p), nn.Conv2d(i, 1, k, 1, p)])
                                    for i, o, k, p in zip(inputs, hidden_sizes, kernel_sizes, paddings))

    def forward(self, x):
        for conv, gate in self.blocks:
            x = conv(x).relu() * torch.sigmoid(gate(x))
        return x


class PlainMapConv(nn.Module):
    """Each layer: relu(conv(x)), no mask between layers."""

    def __init__(self, input_size, hidden_sizes, kernel_sizes, paddings):
        super().__init__()
        sizes = [input_size] + list(hidden_sizes)
        self.convs = nn.ModuleList(nn.Conv2d(sizes[i], sizes[i + 1], k, 1, p)
                                   for i, (k, p) in enumerate(zip(kernel_sizes, paddings)))

    def forward(self, x):
        for conv in self.convs:
            x = conv(x).relu()
        return x


class ProposalHead(nn.Module):
    """[S, H, R, A] -> logits [S, R, A] of the valid cells (0 elsewhere), in float32."""

    def __init__(self, input_size):
        super().__init__()
        self.predictor = nn.Conv2d(input_size, 1, 1, 1)

    def forward(self, x, valid):
        with torch.autocast(x.device.type, enabled=False):
            return (self.predictor(x.to(self.predictor.weight.dtype)) * valid.to(self.predictor.weight.dtype))[:, 0]


MAP_CONVS = {"gated": GatedMapConv, "conv": PlainMapConv}
