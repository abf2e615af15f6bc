"""The reference's two 2D maps on tan's sparse maps (tan.modeling.map2d.feat2d).

Its SparsePropMaxPool fills, scale by scale, the diagonals that tan's
SparseMaxPool2D fills for the counts ``pooling_counts(NUM_SCALE_LAYERS)``
(its first layer of scale 0 is a max-pool of kernel 1, the diagonal itself;
each later scale starts with a kernel-3 stride-2 pool, as tan's chain does on
entering a group), and max is exact: the same map, bit for bit.

Its SparsePropConv has the same chain of 1D convolutions (kernel 3 stride 2
on entering a scale, kernel 2 stride 1 within one), and one more: the first
layer of scale 0 is a 1 x 1 convolution, whose output is the diagonal and
the input of the chain. :class:`SparsePropConv2D` is tan's SparseConv2D
behind that convolution (``first``).
"""
from torch import nn

from ..map2d.feat2d import SparseConv2D, SparseMaxPool2D
from .config import pooling_counts


class SparsePropConv2D(SparseConv2D):
    def __init__(self, num_clips, num_scale_layers, hidden_size):
        super().__init__(num_clips, pooling_counts(num_scale_layers), hidden_size)
        self.first = nn.Conv1d(hidden_size, hidden_size, 1)

    def forward(self, x):
        # x: [B, H, N] -> [B, H, N, N]
        return super().forward(self.first(x))


def build_prop_map(node):
    """MODEL.TAN_MSRA's PROP_MODULE: the max-pooled or the convolutional map."""
    prop = node.PROP_MODULE
    if prop.NAME == "SparsePropConv":
        return SparsePropConv2D(node.NUM_CLIPS, prop.NUM_SCALE_LAYERS, node.FRAME_MODULE.HIDDEN_SIZE)
    return SparseMaxPool2D(node.NUM_CLIPS, pooling_counts(prop.NUM_SCALE_LAYERS))


def prop_conv_name(scale, layer, num_scale_layers):
    """This model's name (under ``feat2d.``) of the reference's ``prop_layer.layers.{scale}.{layer}``."""
    if scale == 0 and layer == 0:
        return "first"
    return f"convs.{sum(num_scale_layers[:scale]) + layer - 1}"
