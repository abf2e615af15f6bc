"""MMN's proposal branch: stacked masked 2D convolutions, each followed by
batch norm, then two 1 x 1 convolutions that embed every valid cell twice in
the joint space, once for matching and once for the IoU score (docs/mmn.md §2).

State-dict names follow MMN's code (``proposal_conv.convs.{l}``,
``proposal_conv.bn.{l}``, ``conv1x1_contrastive``, ``conv1x1_iou``), so its
released checkpoints load. The weight maps are built once from the mask (as
for TAN's predictor) instead of being convolved anew every forward, and the
two heads run on the valid cells only, as a matrix product.

Row strips (PREDICTOR.STRIP_ROWS > 0; docs/mmn.md §2.1). Batch norm's
training statistics are taken over every cell of a conv's output, so unlike
TAN's predictor the cells no valid output depends on still count. But a cell
whose K x K window holds only zeros (the weight map of its layer is zero
there) outputs exactly the conv's bias, so those cells enter the statistics
as a count times the bias and are never computed: each conv runs only on
strips covering its cells of non-zero weight (where the input can be
non-zero). In evaluation, where batch norm uses its running statistics,
the strips cover only the cells the valid outputs depend on, as for TAN.
"""
import torch
from torch import nn
from torch.nn import functional as F

from ..map2d.band import (BandConv, BandLayers, BandStatistics, NormalizedBandConv, NormalizedCells,
                         live_band, to_band, with_slot)
from ..map2d.definitions import runs_own_definition
from ..map2d.recompute import Recomputation, recomputed
from ..map2d.strips import build_weight_maps, needed_cells, strip_conv, strip_plan


def covered(plan, size, device=None):
    """[size, size] bool: the cells a strip plan computes."""
    mask = torch.zeros(size, size, dtype=torch.bool, device=device)
    for r0, r1, c0, c1 in plan:
        mask[r0:r1, c0:c1] = True
    return mask


# A layer whose strips would cover more than this share of its output runs
# dense: assembling the strips would cost more than the cells it saves.
DENSE_ABOVE = 0.8


def worth_it(plan, size):
    """``plan``, or None (compute the layer dense) when it saves too little."""
    area = sum((r1 - r0) * (c1 - c0) for r0, r1, c0, c1 in plan)
    return plan if area <= DENSE_ABOVE * size * size else None


class JointProposalConv(nn.Module):
    def __init__(self, input_size, hidden_size, kernel_size, num_stack_layers, joint_size, mask2d, strip_rows=0,
                 recompute=False):
        super().__init__()
        self.recompute = recompute
        self.recomputation = Recomputation()
        self.padding = (kernel_size - 1) * num_stack_layers // 2
        self.bn = nn.ModuleList(nn.BatchNorm2d(hidden_size) for _ in range(num_stack_layers))
        convs = [nn.Conv2d(input_size, hidden_size, kernel_size, padding=self.padding)]
        convs += [nn.Conv2d(hidden_size, hidden_size, kernel_size) for _ in range(num_stack_layers - 1)]
        self.convs = nn.ModuleList(convs)
        self.conv1x1_iou = nn.Conv2d(hidden_size, joint_size, 1)
        self.conv1x1_contrastive = nn.Conv2d(hidden_size, joint_size, 1)
        weight_maps = build_weight_maps(mask2d, kernel_size, num_stack_layers)
        for index, weight in enumerate(weight_maps):
            self.register_buffer(f"weight_map_{index}", weight, persistent=False)
        n = mask2d.shape[-1]
        i, j = mask2d.nonzero(as_tuple=True)
        self.register_buffer("cells", i * n + j, persistent=False)  # valid cells, row-major
        self.train_plans = self.eval_plans = None
        if strip_rows > 0:
            self.train_plans = [worth_it(strip_plan(w.cpu() > 0, strip_rows), w.shape[-1]) for w in weight_maps]
            self.eval_plans = [worth_it(strip_plan(c, strip_rows), c.shape[-1])
                               for c in needed_cells(mask2d, weight_maps, kernel_size)]
            self.uncovered = []  # per layer: cells outside the strips (a Python int: no device read-back)
            for index, (plan, weight) in enumerate(zip(self.train_plans, weight_maps)):
                mask = covered(plan, weight.shape[-1]) if plan is not None else None
                self.uncovered.append(int((~mask).sum()) if mask is not None else 0)
                if mask is not None:
                    self.register_buffer(f"covered_{index}", mask, persistent=False)
            self._init_bands(mask2d, weight_maps, kernel_size)

    def _init_bands(self, mask2d, weight_maps, kernel_size):
        """What training keeps (:mod:`tan.modeling.map2d.band`): per layer, its raw conv
        outputs at the cells of non-zero weight (all of them enter the batch statistics)."""
        band_in, bands = live_band(mask2d, weight_maps, self.padding)
        self.layers = BandLayers.of_stack(band_in, bands, weight_maps, self.train_plans, kernel_size)
        for index, (cells, weight) in enumerate(zip(bands, weight_maps)):
            self.register_buffer(f"band_weights_{index}", with_slot(weight.flatten()[cells]), persistent=False)
        # where the valid cells sit in the last band (they all have non-zero weight)
        position = torch.full((weight_maps[-1].numel(),), -1, dtype=torch.long)
        position[bands[-1]] = torch.arange(len(bands[-1]))
        self.register_buffer("valid_in_band", position[self.cells.cpu()], persistent=False)

    @staticmethod
    def _embed(head, x):
        # A 1 x 1 conv over the selected cells: x [V, H, C] -> [V, J, C].
        return F.conv1d(x, head.weight[..., 0], head.bias)

    @property
    def stores_bands(self):
        """Whether this forward keeps only the bands for its backward (strips, training, autograd recording,
        and this class's layer: the bands compute it)."""
        return (self.train_plans is not None and self.training and torch.is_grad_enabled()
                and runs_own_definition(self, JointProposalConv, "activate"))

    @staticmethod
    def activate(y, weight, dtype=None):
        """A layer's batch-normalised conv output -> its activations: ReLU, then the layer's weight
        map (in ``dtype``, by default y's). NormalizedBandConv and NormalizedCells compute the same
        at the band."""
        return y.relu() * weight.to(dtype or y.dtype)

    def forward(self, x):
        """x [V, H_in, N, N] -> (matching, IoU) cell embeddings, each [V, J, C] over the C valid cells."""
        if self.stores_bands:
            cells = to_band(x, self.cells)  # the map is zero elsewhere
            if self.recompute:
                cells = recomputed(self._band_stack, cells, recomputation=self.recomputation)
            else:
                cells = self._band_stack(cells)
            return self._embed(self.conv1x1_contrastive, cells), self._embed(self.conv1x1_iou, cells)
        if self.train_plans is None:
            for index, (conv, bn) in enumerate(zip(self.convs, self.bn)):
                x = self.activate(bn(conv(x)), getattr(self, f"weight_map_{index}"), x.dtype)
        else:
            x = self._strips(x)
        cells = x.flatten(2).index_select(2, self.cells)  # [V, H, C]
        return self._embed(self.conv1x1_contrastive, cells), self._embed(self.conv1x1_iou, cells)

    def _band_stack(self, cells):
        """The valid cells [V, H_in, C] -> their activations after the last layer [V, H, C],
        keeping one band of raw conv outputs per layer."""
        layers, update = self.layers.on(cells.device), not self.recomputation.active
        y = BandConv.apply(with_slot(cells), self.convs[0].weight, self.convs[0].bias, None, layers[0])
        for index in range(1, len(self.convs)):
            previous = index - 1
            bn = self.bn[previous]
            mean, invstd = BandStatistics.apply(y, self.convs[previous].bias, layers[previous].out_size, bn, update)
            conv = self.convs[index]
            y = NormalizedBandConv.apply(y, mean, invstd, bn.weight, bn.bias, getattr(self, f"band_weights_{previous}"),
                                         conv.weight, conv.bias, layers[index])
        last, bn = len(self.convs) - 1, self.bn[-1]
        mean, invstd = BandStatistics.apply(y, self.convs[last].bias, layers[last].out_size, bn, update)
        weights = getattr(self, f"band_weights_{last}").index_select(0, self.valid_in_band)
        return NormalizedCells.apply(y.index_select(2, self.valid_in_band), mean, invstd, bn.weight, bn.bias, weights)

    def _strips(self, x):
        batch_statistics = self.training
        plans = self.train_plans if batch_statistics else self.eval_plans
        x = F.pad(x, [self.padding] * 4)
        for index, (conv, bn) in enumerate(zip(self.convs, self.bn)):
            weight = getattr(self, f"weight_map_{index}")
            plan = plans[index]
            if plan is None:  # dense, on the input padded above
                y = F.conv2d(x, conv.weight, conv.bias)
            else:
                y = strip_conv(conv, x, plan, weight.shape[-1])
            if batch_statistics and plan is not None:
                y = self._batch_norm_with_bias_cells(y, conv, bn, getattr(self, f"covered_{index}"),
                                                     self.uncovered[index])
            else:
                y = bn(y)
            x = self.activate(y, weight)
        return x

    @staticmethod
    def _batch_norm_with_bias_cells(y, conv, bn, computed, uncovered):
        """Training-mode batch norm of a conv output that holds the computed cells
        (``computed``) and zeros at the ``uncovered`` others, where the true output is
        the conv's bias: the statistics count those cells as the bias, as the dense stack would."""
        b, c, h, w = y.shape
        total = b * h * w
        missing = b * uncovered
        exact = torch.promote_types(y.dtype, torch.float32)  # statistics in float32 at least, as autocast does
        y32 = y.to(exact)
        bias = conv.bias.to(exact) if conv.bias is not None else y32.new_zeros(c)
        mean = (y32.sum(dim=(0, 2, 3)) + missing * bias) / total
        centred = (y32 - mean[None, :, None, None]) * computed
        var = (centred.pow(2).sum(dim=(0, 2, 3)) + missing * (bias - mean).pow(2)) / total
        if bn.track_running_stats:
            with torch.no_grad():
                momentum = bn.momentum if bn.momentum is not None else 1.0 / float(bn.num_batches_tracked + 1)
                bn.running_mean.mul_(1 - momentum).add_(momentum * mean)
                bn.running_var.mul_(1 - momentum).add_(momentum * var * total / max(total - 1, 1))
                bn.num_batches_tracked.add_(1)
        scale = bn.weight.to(exact) * torch.rsqrt(var + bn.eps)
        shift = bn.bias.to(exact) - mean * scale
        return (y32 * scale[None, :, None, None] + shift[None, :, None, None]).to(y.dtype)
