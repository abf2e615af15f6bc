"""Stacked masked 2D convolutions that score every cell (docs/model.md §5)."""
import torch
from torch import nn
from torch.autograd.function import once_differentiable
from torch.nn import functional as F

from ..map2d.band import CONV_ARGS, BandConv, BandLayers, cells_of, needed_band, take, to_band, to_dense, with_slot
from ..map2d.nonzero import restore_nonzero
from ..map2d.definitions import runs_own_definition
from ..map2d.recompute import recomputed
from ..map2d.strips import build_weight_maps, needed_cells, strip_conv, strip_plan


class ProposalConv(nn.Module):
    """``strip_rows`` > 0 computes each conv only on row strips that cover the
    cells the valid outputs depend on (about half of the dense work for the
    reference settings), and in training stores only those cells for the
    backward (:mod:`tan.modeling.map2d.band`). The valid cells' logits and all
    gradients are those of the dense stack (up to the order of float sums);
    other cells of the returned logits are not meaningful, as in the reference
    they are masked."""

    def __init__(self, input_size, hidden_size, kernel_size, num_stack_layers, mask2d, strip_rows=0,
                 recompute=False):
        super().__init__()
        self.padding = (kernel_size - 1) * num_stack_layers // 2
        self.kernel_size = kernel_size
        self.recompute = recompute
        convs = [nn.Conv2d(input_size, hidden_size, kernel_size, padding=self.padding)]
        convs += [nn.Conv2d(hidden_size, hidden_size, kernel_size) for _ in range(num_stack_layers - 1)]
        self.convs = nn.ModuleList(convs)
        self.pred = nn.Conv2d(hidden_size, 1, 1)
        weight_maps = build_weight_maps(mask2d, kernel_size, num_stack_layers)
        for index, weight in enumerate(weight_maps):
            self.register_buffer(f"weight_map_{index}", weight, persistent=False)
        self.plans = self.layers = None
        if strip_rows > 0:
            self.plans = [strip_plan(n, strip_rows) for n in needed_cells(mask2d, weight_maps, kernel_size)]
            self.init_bands(mask2d, weight_maps)

    def init_bands(self, mask2d, weight_maps):
        """The band geometry of the strips in ``self.plans`` (one kernel size, stride 1, the
        input padded once): which cells each layer keeps for the backward in training."""
        kernel_size, self.mask2d_size = self.kernel_size, mask2d.shape[-1]
        band_in, bands = needed_band(mask2d, weight_maps, kernel_size, self.padding)
        # the input band's cells in the unpadded N x N map (the band lies inside it: the padding is zero)
        side, n = self.mask2d_size + 2 * self.padding, self.mask2d_size
        rows, cols = band_in // side - self.padding, band_in % side - self.padding
        self.register_buffer("input_cells", rows * n + cols, persistent=False)
        for index, (cells, weight) in enumerate(zip(bands, weight_maps)):
            self.register_buffer(f"band_{index}", cells, persistent=False)
            self.register_buffer(f"band_weights_{index}", with_slot(weight.flatten()[cells]), persistent=False)
        self.layers = BandLayers.of_stack(band_in, bands, weight_maps, self.plans, kernel_size)

    @property
    def valid_cells(self):
        """The valid cells' flat row-major index (the last layer's band), with strips."""
        return getattr(self, f"band_{len(self.convs) - 1}")

    @property
    def stores_bands(self):
        """Whether a forward now keeps only the bands for its backward (strips, autograd recording,
        and the layer and score of this class: the bands compute those)."""
        return (self.layers is not None and torch.is_grad_enabled()
                and runs_own_definition(self, ProposalConv, "activate", "score"))

    def forward(self, x):
        # x: [B, H, N, N]
        if self.stores_bands:
            return self.forward_band(with_slot(to_band(x, self.input_cells)))
        if self.plans is not None:
            x = F.pad(x, [self.padding] * 4)
        for index, conv in enumerate(self.convs):
            weight = getattr(self, f"weight_map_{index}")
            if self.plans is None:
                x = conv(x)
            else:
                x = strip_conv(conv, x, self.plans[index], weight.shape[-1])
            x = self.activate(x, weight)
        return self.score(x)

    @staticmethod
    def activate(x, weight):
        """A layer's conv output -> its activations: ReLU, then the layer's weight map (staying in
        the autocast dtype: a float32 map would promote). BandConv computes the same at the band."""
        return x.relu() * weight.to(x.dtype)

    def score(self, x):
        """[B, H, N, N] last activations -> logits [B, N, N]. The 1 x 1 scoring conv runs in
        float32 under mixed precision: bf16 logits (8 significant bits) would tie many
        candidates and blur the ranking."""
        with torch.autocast(x.device.type, enabled=False):
            return self.pred(x.to(self.pred.weight.dtype)).squeeze(1)  # [B, N, N], batch kept for B = 1

    def forward_band(self, band, rebuild_input=None):
        """The input's band (the input at ``input_cells``, with its slot: [B, H, M + 1]) ->
        logits [B, N, N], keeping one band per layer for the backward, as its non-zero values
        (or, with ``recompute``, only the input). ``rebuild_input``, how to compute the input
        band again (:class:`BandConv`), lets the first layer keep that instead of the input band."""
        if self.recompute:  # the recomputation keeps its input: a rebuild would save nothing
            # and the bands it makes live only in the backward: kept whole, their sizes cannot
            # change if the recomputed activations differ in the last bit (a value near zero)
            return recomputed(self._stack, band)
        # torch.compile cannot trace a tensor whose size depends on its values without
        # breaking the graph at each layer: compiled, the bands are kept whole
        return self._stack(band, rebuild_input, keep_nonzero_values=not compiling())

    def _stack(self, band, rebuild_input=None, keep_nonzero_values=False):
        kept = (None, None)  # each layer keeps its input as the previous one kept its output
        for index, (conv, layer) in enumerate(zip(self.convs, self.layers.on(band.device))):
            band, *kept = BandConv.apply(band, conv.weight, conv.bias, getattr(self, f"band_weights_{index}"), layer,
                                         rebuild_input if index == 0 else None, *kept, keep_nonzero_values)
        # the scoring conv on the dense map it always read, rebuilt in its backward (1 channel out: cheap)
        return ScoredBand.apply(band, self.pred.weight, self.pred.bias, self.valid_cells, self.mask2d_size, *kept)


def compiling():
    """Whether torch.compile is tracing the code now (torch >= 2.3 says; before, the bands
    are packed under torch.compile too, correct but in several graphs)."""
    is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    return bool(is_compiling and is_compiling())


class ScoredBand(torch.autograd.Function):
    """:meth:`ProposalConv.score` of the last layer's band (the valid cells, [B, H, C]) placed
    in the N x N map, in float32: [B, N, N]. Saves the band (or, given, the non-zero values and
    bits the last layer keeps of it: :class:`BandConv`), not the map; its backward rebuilds the
    map and makes the convolution's backward call autograd would make."""

    @staticmethod
    def forward(ctx, band, weight, bias, cells, n, kept_values=None, kept_bits=None):
        with torch.autocast(band.device.type, enabled=False):
            x = to_dense(cells_of(band).to(weight.dtype), cells, n)
            logits = F.conv2d(x, weight, bias)
        ctx.save_for_backward(band if kept_bits is None else None, weight, cells, kept_values, kept_bits)
        ctx.n, ctx.band_shape, ctx.band_dtype = n, band.shape, band.dtype
        return logits.squeeze(1)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        band, weight, cells, kept_values, kept_bits = ctx.saved_tensors
        if kept_bits is not None:
            band = restore_nonzero(kept_values, kept_bits, ctx.band_shape)
        x = to_dense(cells_of(band).to(weight.dtype), cells, ctx.n)
        gx, gw, gb = torch.ops.aten.convolution_backward(grad.unsqueeze(1), x, weight, [weight.shape[0]], *CONV_ARGS,
                                                         [ctx.needs_input_grad[0], True, True])
        grad_band = with_slot(take(gx.flatten(2), cells)).to(ctx.band_dtype) if gx is not None else None
        return grad_band, gw, gb, None, None, None, None


def build_predictor(cfg, mask2d):
    tan = cfg.MODEL.TAN
    return ProposalConv(tan.FEATPOOL.HIDDEN_SIZE, tan.PREDICTOR.HIDDEN_SIZE, tan.PREDICTOR.KERNEL_SIZE,
                        tan.PREDICTOR.NUM_STACK_LAYERS, mask2d, tan.PREDICTOR.STRIP_ROWS,
                        tan.PREDICTOR.RECOMPUTE)
