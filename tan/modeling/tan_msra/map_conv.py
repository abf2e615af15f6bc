"""The reference's MapConv and pred_layer: 2D convolutions over the fused map,
each followed by relu and a weight map, then a 1 x 1 convolution to one logit.

The forward pass is tan's ProposalConv's (tan.modeling.tan2d.predictor), which
runs the convolutions densely or on row strips (keeping one band per layer in
training: tan.modeling.map2d.band), then its ``pred`` in float32;
what differs is the construction: one kernel, stride, padding and dilation
per layer, as its files give them, and the weight maps computed from the map
mask the way the reference's get_padded_mask_and_weight does (a convolution of
the mask with ones of each layer's geometry; weight 1 / count where the count
is positive; the next mask where the weight is). For the released form (one
kernel, stride and dilation 1, all the padding on the first layer) these maps
equal tan's build_weight_maps, value for value (tests/test_tan_msra.py).
"""
import torch
from torch import nn
from torch.nn import functional as F

from ..map2d.strips import needed_cells, strip_plan
from ..tan2d.predictor import ProposalConv


def masked_weights(mask2d, convs):
    """Per conv of ``convs``, its output's weight map [H_l, W_l] (float32)."""
    mask = mask2d[None, None].float()
    weights = []
    for conv in convs:
        ones = torch.ones(1, 1, *conv.kernel_size, device=mask.device)
        counts = F.conv2d(mask, ones, stride=conv.stride, padding=conv.padding, dilation=conv.dilation)
        weight = torch.where(counts > 0, 1.0 / counts.clamp(min=1), torch.zeros_like(counts))
        weights.append(weight[0, 0])
        mask = (weight > 0).float()
    return weights


class MapConv(ProposalConv):
    """``convs.{l}`` (its map_layer.convs.{l}) and ``pred`` (its pred_layer); the
    output is [B, N, N] logits, not yet masked."""

    def __init__(self, input_size, hidden_sizes, kernel_sizes, strides, paddings, dilations, mask2d,
                 strip_rows=0, released_form=False):
        nn.Module.__init__(self)  # ProposalConv's own construction builds a uniform stack; this one is per layer
        channels = [input_size, *hidden_sizes]
        self.convs = nn.ModuleList(nn.Conv2d(channels[i], channels[i + 1], k, s, p, d) for i, (k, s, p, d)
                                   in enumerate(zip(kernel_sizes, strides, paddings, dilations)))
        self.pred = nn.Conv2d(channels[-1], 1, 1)
        self.padding, self.kernel_size = paddings[0], kernel_sizes[0]
        weights = masked_weights(mask2d, self.convs)
        for index, weight in enumerate(weights):
            self.register_buffer(f"weight_map_{index}", weight, persistent=False)
        self.plans = self.layers = None
        self.recompute = False
        if strip_rows > 0 and released_form:  # strips need stride 1 and one padding of the input
            self.plans = [strip_plan(n, strip_rows) for n in needed_cells(mask2d, weights, self.kernel_size)]
            self.init_bands(mask2d, weights)
