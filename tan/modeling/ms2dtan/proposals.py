"""From clip features to each scale's start x duration map (docs/ms2dtan.md §3).

Scale 0's map has one column per duration 1..A_0 clips: column a holds the
output of layer a of a chain over the clips (a (1, 1) layer, then (2, 1)
layers, each widening the span by one clip). A coarser scale s works on cells
of 2**s clips: the first half of its columns are the even rows and odd
columns of scale s - 1 (the same moments), the second half continue the
chain from scale s - 1's last output, with a (3, 2) layer and then (2, 1)
layers. A cell is valid when every clip it spans is a real one.
"""
import torch
from torch import nn
from torch.nn import functional as F


class ClipPool(nn.Module):
    """[B, D_in, T] rows -> [B, H, T'] clips: 1 x 1 conv, relu, average pool; a
    clip is real when its whole pooling window is."""

    def __init__(self, input_size, hidden_size, kernel_size, stride):
        super().__init__()
        self.vis_conv = nn.Conv1d(input_size, hidden_size, 1, 1)
        self.avg_pool = nn.AvgPool1d(kernel_size, stride)

    def forward(self, rows, real):
        clips = self.avg_pool(self.vis_conv(rows).relu())
        real = F.avg_pool1d(real, self.avg_pool.kernel_size[0], self.avg_pool.stride[0]) == 1
        return clips * real.to(clips.dtype), real.to(clips.dtype)


def chain_steps(num_layers):
    """(kernel, stride) of every layer of every scale's chain."""
    return [[(1, 1) if s == 0 and i == 0 else (3, 2) if i == 0 else (2, 1) for i in range(n)]
            for s, n in enumerate(num_layers)]


def chain_layer(name, hidden_size, kernel, stride):
    if name == "pool":
        return nn.MaxPool1d(kernel, stride)
    return nn.Sequential(nn.Conv1d(hidden_size, hidden_size, kernel, stride), nn.BatchNorm1d(hidden_size), nn.Tanh())


class MultiScaleProposals(nn.Module):
    """[B, H, N] clips and their realness [B, 1, N] -> per scale s the map [B, H, N_s, A_s]
    and its valid cells [B, 1, N_s, A_s] (N_s = N // 2**s)."""

    def __init__(self, name, hidden_size, num_layers):
        super().__init__()
        self.steps = chain_steps(num_layers)
        self.layers = nn.ModuleList(nn.ModuleList(chain_layer(name, hidden_size, k, s) for k, s in scale)
                                    for scale in self.steps)

    def forward(self, x, real):
        n = x.shape[-1]
        maps, masks = [], []
        for scale, (layers, steps) in enumerate(zip(self.layers, self.steps)):
            rows = n // 2 ** scale
            # the finer scale's moments of an even number of its cells, on every other row
            cells = [maps[-1][:, :, :2 * rows:2, 1::2]] if scale else []
            valid = [masks[-1][:, :, :2 * rows:2, 1::2]] if scale else []
            columns, column_masks = [], []
            for layer, (kernel, stride) in zip(layers, steps):
                # a span is real when all its clips are: the mask pooled as the chain pools
                real = (F.avg_pool1d(real, kernel, stride) == 1).to(x.dtype)
                x = layer(x) * real
                # one column per layer, zero past the chain's end: stacked once rather than
                # written in place (each write would copy the whole map's gradient back)
                columns.append(F.pad(x, (0, rows - x.shape[-1])))
                column_masks.append(F.pad(real[..., :x.shape[-1]], (0, rows - x.shape[-1])))
            maps.append(torch.cat(cells + [torch.stack(columns, dim=-1)], dim=-1))
            masks.append(torch.cat(valid + [torch.stack(column_masks, dim=-1)], dim=-1))
        return maps, masks
