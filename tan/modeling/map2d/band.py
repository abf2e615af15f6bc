"""Band storage for a stack of masked 2D convolutions in training
(docs/model.md §5.4, docs/mmn.md §2.2).

Autograd, left alone, keeps for every layer a zero-filled full map, the
ReLU's output and the padded input of each strip: several dense maps per
layer, most of it zeros or copies. Here each layer is one autograd function
whose output is the layer's *band*: its values at the cells that later
layers and the loss can depend on, stored as ``[B, C, M + 1]`` (M cells, in the
row-major order of a flat index, then a zero slot: :class:`BandLayer`). The
next layer reads the band, and the band is kept once for both backwards. Dense
maps exist only inside a function, for the duration of its forward or
backward: the strips are convolved as in
:func:`tan.modeling.map2d.strips.strip_conv`, on a map rebuilt from the band.
A band of activations after a ReLU is about half zeros, so it is kept as its
non-zero values and one bit per cell saying where they are
(:mod:`tan.modeling.map2d.nonzero`), which the layer returns with the band for
the next layer to keep in its place.

Two kinds of layer:

* :class:`BandConv`: conv -> ReLU -> weight map (2D-TAN), or the conv alone
  (MMN's first layer). The band holds the activations; where they are zero is
  the ReLU's mask, so what is kept of one band serves the backward of all
  three steps and the next layer's.
* :class:`NormalizedBandConv`: batch norm -> ReLU -> weight map of the
  previous layer, then conv (MMN). The band holds the raw conv outputs; the
  normalisation is recomputed from them (element-wise, cheap), and the batch
  statistics come from :class:`BandStatistics`, whose backward is the exact
  derivative of the closed form that counts the cells outside the band as
  the conv's bias.

Both compute every product and sum the dense stack computes at the cells
that matter; their gradients equal the dense stack's up to the order of
float sums (tests/test_band.py, in float64).
"""
import torch
from torch.autograd.function import once_differentiable
from torch.nn import functional as F

from .nonzero import keep_nonzero, nonzero_places, restore_nonzero
from .strips import needed_cells

CONV_ARGS = ([1, 1], [0, 0], [1, 1], False, [0, 0], 1)  # stride, padding, dilation, transposed, output padding, groups


def flat_cells(mask):
    """[S, S] bool -> the flat row-major indices of its true cells (int64)."""
    return mask.flatten().nonzero().flatten()


def window_reach(mask, kernel_size):
    """[S, S] bool output cells -> [S + K - 1, S + K - 1] bool: the input cells their K x K windows read."""
    ones = torch.ones(1, 1, kernel_size, kernel_size)
    return F.conv_transpose2d(mask.float()[None, None], ones)[0, 0] > 0


class BandLayer:
    """One layer's geometry: its input band (``in_cells`` of an ``in_size`` square), its
    output band (``out_cells`` of an ``out_size`` square) and the strips (r0, r1, c0, c1)
    of the output that are convolved.

    A band tensor is [B, C, M + 1]: the M cells, then one *slot* that holds zero.
    For each strip the layer holds, per cell of the input window the strip reads,
    its position in the input band (the slot where the band has no such cell), and
    the same for the strip's own cells in the output band; so a window is one
    gather from a band, and a window's gradient one scatter-add into one (the
    slot collecting what belongs to no cell)."""

    def __init__(self, in_cells, in_size, out_cells, out_size, plan, kernel_size):
        k = kernel_size
        self.plan = list(plan) if plan is not None else [(0, out_size, 0, out_size)]
        self.kernel_size, self.in_size, self.out_size = k, in_size, out_size
        self.num_in, self.num_out = len(in_cells), len(out_cells)
        windows = [_positions(in_cells, in_size, (r0, r1 + k - 1, c0, c1 + k - 1)) for r0, r1, c0, c1 in self.plan]
        strips = [_positions(out_cells, out_size, rect) for rect in self.plan]
        # The strips partition the rows and each spans its rows' band cells, so a strip's
        # cells are one run of the (row-major) output band: positions ranges[i], places
        # ``inside`` in the strip.
        inside = [(p < len(out_cells)).nonzero().flatten() for p in strips]
        self.ranges = [(int(p[i[0]]), int(p[i[-1]]) + 1) if len(i) else (0, 0) for p, i in zip(strips, inside)]
        if sum(len(i) for i in inside) != len(out_cells) or any(b - a != len(i) for (a, b), i in
                                                                 zip(self.ranges, inside)):
            raise ValueError("the strips do not cover the output band's cells row by row")
        self.window_sizes = [len(p) for p in windows]
        self.strip_sizes = [len(p) for p in strips]
        self.inside_sizes = [len(i) for i in inside]
        self.tensors = {"windows": torch.cat(windows), "strips": torch.cat(strips), "inside": torch.cat(inside)}

    def to(self, device):
        """This geometry with its index tensors on ``device`` (a shallow copy)."""
        moved = object.__new__(BandLayer)
        moved.__dict__.update(self.__dict__)
        moved.tensors = {k: v.to(device) for k, v in self.tensors.items()}
        return moved

    def pieces(self, reverse=False):
        """Per strip: (rectangle, its window's positions in the input band, its cells' in the
        output band, the run of output band positions it holds, where they sit in the strip)."""
        windows = self.tensors["windows"].split(self.window_sizes)
        strips = self.tensors["strips"].split(self.strip_sizes)
        inside = self.tensors["inside"].split(self.inside_sizes)
        pieces = list(zip(self.plan, windows, strips, self.ranges, inside))
        return reversed(pieces) if reverse else pieces


class BandLayers:
    """A stack's layers, with their index tensors moved to each device the model runs on (once)."""

    def __init__(self, layers):
        self.layers = list(layers)
        self.on_device = {}

    @classmethod
    def of_stack(cls, band_in, bands, weight_maps, plans, kernel_size):
        """The layers of a stack: layer l reads the input band (``band_in``, of the padded
        input) or layer l - 1's band, and writes ``bands[l]`` of its weight map's size."""
        sizes = [w.shape[-1] for w in weight_maps]
        inputs = [(band_in, sizes[0] + kernel_size - 1)] + list(zip(bands[:-1], sizes[:-1]))
        return cls(BandLayer(cells, in_size, out, size, plan, kernel_size)
                   for (cells, in_size), out, size, plan in zip(inputs, bands, sizes, plans))

    def on(self, device):
        if device not in self.on_device:
            self.on_device[device] = [layer.to(device) for layer in self.layers]
        return self.on_device[device]


def _positions(cells, size, rect):
    """For each cell of ``rect`` = (r0, r1, c0, c1) of a ``size`` square, row-major: its position
    in ``cells`` (flat, sorted), or len(cells) (the band's zero slot) where it is not one."""
    r0, r1, c0, c1 = rect
    rows = torch.arange(r0, r1)[:, None] * size + torch.arange(c0, c1)[None, :]
    lookup = torch.full((size * size,), len(cells), dtype=torch.long)
    lookup[cells] = torch.arange(len(cells))
    return lookup[rows.flatten()]


def compute_dtype(x):
    """The dtype the convolutions run in: autocast's where it is on, else the input's."""
    device = x.device.type
    if x.dtype != torch.float64 and _autocast_enabled(device):  # autocast leaves float64 alone
        return _autocast_dtype(device)
    return x.dtype


def autocast_now(device):
    """A context factory that puts autocast on ``device`` in the state it is in now (to run
    later what ran now, such as a recomputation in the backward, which runs outside autocast)."""
    if _autocast_enabled(device):
        dtype = _autocast_dtype(device)
        return lambda: torch.autocast(device, dtype=dtype)
    return lambda: torch.autocast(device, enabled=False)


def _autocast_enabled(device):
    if hasattr(torch, "get_autocast_dtype"):  # torch >= 2.4: one call for every device type
        return torch.is_autocast_enabled(device)
    return torch.is_autocast_cpu_enabled() if device == "cpu" else torch.is_autocast_enabled()


def _autocast_dtype(device):
    if hasattr(torch, "get_autocast_dtype"):
        return torch.get_autocast_dtype(device)
    return torch.get_autocast_cpu_dtype() if device == "cpu" else torch.get_autocast_gpu_dtype()


def take(x, index):
    """x [B, C, L] at positions ``index`` [K] of its last dimension: [B, C, K]. torch.gather
    with the index broadcast: several times faster than index_select along a last
    dimension on the CPU, but its backward would keep all of ``x``: for use where
    autograd is not recording."""
    return torch.gather(x, 2, index.expand(x.shape[0], x.shape[1], -1))


def to_dense(band, cells, size):
    """[B, C, M] values of ``cells`` -> [B, C, size, size], zero elsewhere."""
    b, c, _ = band.shape
    dense = band.new_zeros(b, c, size * size)
    dense.scatter_(2, cells.expand(b, c, -1), band)
    return dense.view(b, c, size, size)


def to_band(dense, cells):
    """[B, C, S, S] -> [B, C, M]: the values of ``cells``. Differentiable at the cost of
    nothing saved (index_select's backward needs only the index; inside the
    functions here, where autograd is not recording, :func:`take` is the fast way)."""
    return dense.flatten(2).index_select(2, cells)


def with_slot(cells):
    """[B, C, M] -> a band [B, C, M + 1] (its zero slot appended)."""
    return F.pad(cells, (0, 1))


def cells_of(band):
    """A band's M cells, without its slot (a view)."""
    return band[..., :-1]


def conv_strips(band, weight, bias, layer):
    """The layer's conv on its strips, from its input band: the output band [B, C_out, M_out + 1].
    Each strip's window is gathered from the band and its band cells copied into their
    run of the output band, so no full map is built."""
    k = layer.kernel_size
    b = band.shape[0]
    out = band.new_empty(b, weight.shape[0], layer.num_out + 1)
    for (r0, r1, c0, c1), window, _, (p0, p1), inside in layer.pieces():
        x = take(band, window).view(b, band.shape[1], r1 - r0 + k - 1, c1 - c0 + k - 1)
        out[..., p0:p1] = take(F.conv2d(x, weight, bias).flatten(2), inside)
    out[..., -1] = 0
    return out


def conv_strips_backward(grad, band, weight, layer, need_input):
    """Gradients of :func:`conv_strips` (input band or None, weight, bias) from that of its
    output band (its slot zero) and the input band. The strips are taken last to first,
    the order in which autograd sums them for the dense strip path, so that float32
    results are bit for bit the same. The input gradient's slot holds no cell's value."""
    k = layer.kernel_size
    b, c_in, _ = band.shape
    grad_band = band.new_zeros(band.shape) if need_input else None
    grad_w = grad_b = None
    for (r0, r1, c0, c1), window, strip, _, _ in layer.pieces(reverse=True):
        rows, cols = r1 - r0 + k - 1, c1 - c0 + k - 1
        gx, gw, gb = torch.ops.aten.convolution_backward(
            take(grad, strip).view(b, grad.shape[1], r1 - r0, c1 - c0), take(band, window).view(b, c_in, rows, cols),
            weight, [weight.shape[0]], *CONV_ARGS, [need_input, True, True])
        grad_w = gw if grad_w is None else grad_w.add_(gw)
        grad_b = gb if grad_b is None else grad_b.add_(gb)
        if need_input:
            grad_band.scatter_add_(2, window.expand(b, c_in, -1), gx.flatten(2))
    return grad_band, grad_w, grad_b


class BandConv(torch.autograd.Function):
    """in band [B, C_in, M_in + 1] -> the layer's conv at its output band [B, C_out, M_out + 1];
    with ``cell_weights`` (the weight map at the band, slot 0), followed by ReLU and the
    weight map (2D-TAN's layer), and then the result is a triple: (the output band, its
    non-zero values, their bits) (:func:`keep_nonzero`), the last two None unless
    ``keep_nonzero_values``.

    ``kept_values`` and ``kept_bits``, when given, are what the previous layer returned
    with its output, this layer's input band: the layer saves those, not the band (one
    copy of each band, about half its size). ``rebuild_input``, when given, is
    ``(function, tensors)``: ``function(*tensors)`` computes the input band again, bit for
    bit. The layer then saves those tensors instead (for an input that is cheap to
    compute from tensors kept anyway and wide to keep, such as the fused first band)."""

    @staticmethod
    def forward(ctx, band, weight, bias, cell_weights, layer, rebuild_input=None, kept_values=None, kept_bits=None,
                keep_nonzero_values=False):
        dtype = compute_dtype(band)
        activated = cell_weights is not None
        values = bits = None
        with torch.autocast(band.device.type, enabled=False):
            out = conv_strips(band.to(dtype), weight.to(dtype), bias.to(dtype), layer)
            if activated:
                out = out.relu_().mul_(cell_weights.to(dtype))
                if keep_nonzero_values:
                    values, bits = keep_nonzero(out)
                    ctx.mark_non_differentiable(values, bits)
        ctx.set_materialize_grads(False)  # no zero gradients made for the values and bits
        ctx.layer, ctx.dtype, ctx.activated, ctx.mask_in_bits = layer, dtype, activated, bits is not None
        ctx.band_shape, ctx.band_dtype = band.shape, band.dtype
        ctx.rebuild, sources = rebuild_input if rebuild_input is not None else (None, ())
        # The output is kept for the ReLU's mask only (where it is zero): its bits, or itself;
        # a raw layer needs none. Saved through autograd, the rebuild's tensors get its
        # checks and hooks as the band would.
        mask = (bits if bits is not None else out) if activated else None
        ctx.save_for_backward(band if ctx.rebuild is None and kept_bits is None else None, weight, cell_weights,
                              mask, kept_values, kept_bits, *sources)
        return (out, values, bits) if activated else out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out, *_):
        if grad_out is None:  # the band reached no loss
            return (None,) * 9
        band, weight, cell_weights, mask, kept_values, kept_bits, *sources = ctx.saved_tensors
        if ctx.rebuild is not None:
            band = ctx.rebuild(*sources)
        elif kept_bits is not None:
            band = restore_nonzero(kept_values, kept_bits, ctx.band_shape)
        dtype = ctx.dtype
        # In place: the incoming gradient is the next layer's fresh input gradient, used nowhere else.
        grad = grad_out.to(dtype)
        if ctx.activated:  # weight map, then the ReLU's mask (the slot's output is 0: masked too)
            # the output is >= 0 or NaN, so "<= 0" is "== 0", which the bits say
            zero = nonzero_places(mask, grad.shape, zero=True) if ctx.mask_in_bits else mask <= 0
            grad = grad.mul_(cell_weights.to(dtype)).masked_fill_(zero, 0)
        else:
            grad[..., -1] = 0
        grad_band, gw, gb = conv_strips_backward(grad, band.to(dtype), weight.to(dtype), ctx.layer,
                                                 ctx.needs_input_grad[0])
        if grad_band is not None:
            grad_band = grad_band.to(ctx.band_dtype)
        return grad_band, gw.to(weight.dtype), gb.to(weight.dtype), None, None, None, None, None, None


def _exact(x):
    """``x`` in float32 at least (batch-norm arithmetic; float64 stays float64)."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


def activate(y, mean, invstd, gamma, beta, cell_weights):
    """Batch norm with the given statistics, ReLU, weight map, on a band [B, C, M].
    Returns (the float32 normalised values, the activations in y's dtype)."""
    scale = _exact(gamma) * invstd
    shift = _exact(beta) - mean * scale
    a = _exact(y) * scale[:, None] + shift[:, None]
    return a, a.to(y.dtype).relu() * cell_weights.to(y.dtype)


def activate_backward(grad_x, y, a, mean, invstd, gamma, cell_weights):
    """Gradients of :func:`activate` for (y, mean, invstd, gamma, beta), from that of its activations."""
    # the ReLU's mask as the forward applied it: in y's dtype
    grad_a = torch.where(a.to(y.dtype) > 0, _exact(grad_x) * _exact(cell_weights), torch.zeros((), device=a.device))
    scale = _exact(gamma) * invstd
    y32 = _exact(y)
    grad_shift = grad_a.sum(dim=(0, 2))
    grad_scale = (grad_a * y32).sum(dim=(0, 2)) - grad_shift * mean
    grad_y = (grad_a * scale[:, None]).to(y.dtype)
    return grad_y, -grad_shift * scale, grad_scale * _exact(gamma), grad_scale * invstd, grad_shift


class NormalizedCells(torch.autograd.Function):
    """:func:`activate` as one autograd step that saves only its input band."""

    @staticmethod
    def forward(ctx, y, mean, invstd, gamma, beta, cell_weights):
        ctx.save_for_backward(y, mean, invstd, gamma, beta, cell_weights)
        return activate(y, mean, invstd, gamma, beta, cell_weights)[1]

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_x):
        y, mean, invstd, gamma, beta, cell_weights = ctx.saved_tensors
        a, _ = activate(y, mean, invstd, gamma, beta, cell_weights)
        return (*activate_backward(grad_x, y, a, mean, invstd, gamma, cell_weights), None)


class BandStatistics(torch.autograd.Function):
    """Training batch-norm statistics (mean, 1 / std, float32 [C]) of a conv output known
    at its band ``y`` [B, C, M + 1] of a ``size`` x ``size`` map, every other cell being
    exactly the conv's ``bias`` (docs/mmn.md §2.1). Updates ``bn``'s running
    statistics as BatchNorm2d does, unless ``update`` is False (a recomputation)."""

    @staticmethod
    def forward(ctx, y, bias, size, bn, update):
        y32, b = _exact(cells_of(y)), _exact(bias)
        total = y.shape[0] * size * size
        missing = total - y.shape[0] * y32.shape[2]
        mean = (y32.sum(dim=(0, 2)) + missing * b) / total
        var = ((y32 - mean[:, None]).pow(2).sum(dim=(0, 2)) + missing * (b - mean).pow(2)) / total
        invstd = torch.rsqrt(var + bn.eps)
        if update and bn.track_running_stats:
            momentum = bn.momentum if bn.momentum is not None else 1.0 / float(bn.num_batches_tracked + 1)
            bn.running_mean.mul_(1 - momentum).add_(momentum * mean)
            bn.running_var.mul_(1 - momentum).add_(momentum * var * total / max(total - 1, 1))
            bn.num_batches_tracked.add_(1)
        ctx.total, ctx.missing = total, missing
        ctx.save_for_backward(y, bias, mean, invstd)
        return mean, invstd

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_mean, grad_invstd):
        y, bias, mean, invstd = ctx.saved_tensors
        total, missing = ctx.total, ctx.missing
        # d var / d y = 2 (y - mean) / n: the terms through the mean cancel, since the
        # deviations (band and bias cells together) sum to zero.
        grad_var = grad_invstd * -0.5 * invstd.pow(3)
        deviation = _exact(cells_of(y)) - mean[:, None]
        grad_y = (grad_mean / total)[:, None] + (2 * grad_var / total)[:, None] * deviation
        grad_bias = (grad_mean + 2 * grad_var * (_exact(bias) - mean)) * missing / total
        return with_slot(grad_y.to(y.dtype)), grad_bias.to(bias.dtype), None, None, None


class NormalizedBandConv(torch.autograd.Function):
    """Previous layer's raw band [B, C_in, M_in + 1] -> batch norm (given statistics), ReLU and
    its weight map (``cell_weights``, slot 0), then this layer's conv: the raw conv outputs
    at its band [B, C_out, M_out + 1]."""

    @staticmethod
    def forward(ctx, band, mean, invstd, gamma, beta, cell_weights, weight, bias, layer):
        dtype = compute_dtype(band)
        with torch.autocast(band.device.type, enabled=False):
            _, x = activate(band, mean, invstd, gamma, beta, cell_weights)  # the slot's weight is 0
            out = conv_strips(x.to(dtype), weight.to(dtype), bias.to(dtype), layer)
        ctx.layer, ctx.dtype = layer, dtype
        ctx.save_for_backward(band, mean, invstd, gamma, beta, cell_weights, weight)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        band, mean, invstd, gamma, beta, cell_weights, weight = ctx.saved_tensors
        layer, dtype = ctx.layer, ctx.dtype
        a, x = activate(band, mean, invstd, gamma, beta, cell_weights)
        grad = grad_out.to(dtype)
        grad[..., -1] = 0  # what reached the slot belongs to no cell
        gx, gw, gb = conv_strips_backward(grad, x.to(dtype), weight.to(dtype), layer, True)
        grads = activate_backward(gx, band, a, mean, invstd, gamma, cell_weights)
        grad_band, grad_mean, grad_invstd, grad_gamma, grad_beta = grads
        return (grad_band, grad_mean, grad_invstd, grad_gamma.to(gamma.dtype), grad_beta.to(beta.dtype), None,
                gw.to(weight.dtype), gb.to(weight.dtype), None)


def needed_band(mask2d, weight_maps, kernel_size, padding):
    """A stack without batch norm (2D-TAN): (the first layer's input band, as cells of
    the padded input; each layer's output band). Layer l keeps the cells a valid
    final cell depends on (:func:`needed_cells`); the first layer reads the input
    wherever those cells' windows reach inside the N x N map (the padding is zero)."""
    needed = needed_cells(mask2d, weight_maps, kernel_size)
    n = mask2d.shape[-1]
    inside = torch.zeros(n + 2 * padding, n + 2 * padding, dtype=torch.bool)
    inside[padding:padding + n, padding:padding + n] = True
    return flat_cells(window_reach(needed[0], kernel_size) & inside), [flat_cells(x) for x in needed]


def live_band(mask2d, weight_maps, padding):
    """A stack with batch norm in training (MMN): every cell of non-zero weight enters
    the statistics, so layer l keeps the cells where W_l > 0; the first layer's input
    (the 2D map) is zero outside the valid cells."""
    n = mask2d.shape[-1]
    padded = torch.zeros(n + 2 * padding, n + 2 * padding, dtype=torch.bool)
    padded[padding:padding + n, padding:padding + n] = mask2d.cpu().bool()
    return flat_cells(padded), [flat_cells(w.cpu() > 0) for w in weight_maps]
