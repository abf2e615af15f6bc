"""A baseline written the way the reference re-implementation computes
things (docs/model.md §3, §6; docs/metric.md §2), for side-by-side benchmarks and equivalence tests.

It has the same parameters as ``TAN`` (a state dict loads into either), but:
the 2D map is filled by a chain of 1D max-pools and one slice assignment per
offset; the loss reads a stored N x N IoU map per query and picks the valid
cells with a boolean mask; evaluation sorts every candidate and runs the full
greedy NMS in a Python loop, one query at a time, on float32 seconds as the
reference does (TEST.NMS_UNITS "seconds"). Nothing here is used by training
or testing.
"""
import torch
from torch import nn
from torch.nn import functional as F

from tan.config.choices import IOU_THRESHOLDS, RECALL_AT
from tan.modeling.map2d.feat2d import build_mask2d
from tan.modeling.map2d.featpool import build_featpool
from tan.modeling.tan2d.integrator import build_integrator
from tan.modeling.tan2d.predictor import ProposalConv
from tan.structures.moments import iou2d

from .reference_mmn import ChainMap2D


class PoolChainMap2D(nn.Module):
    """Cell (i, i + offset) from iterated max-pools: stride 1 pools for the
    first group, then per later group one (3, 2) pool and (2, 1) pools."""

    def __init__(self, num_clips, pooling_counts):
        super().__init__()
        self.num_clips = num_clips
        pools, cells = [], []
        stride, offset = 1, 0
        for group, count in enumerate(pooling_counts):
            for step in range(count):
                first_of_later_group = group > 0 and step == 0
                pools.append(nn.MaxPool1d(3, 2) if first_of_later_group else nn.MaxPool1d(2, 1))
                offset += stride
                starts = list(range(0, num_clips - offset, stride))
                cells.append((starts, [s + offset for s in starts]))
            stride *= 2
        self.pools = nn.ModuleList(pools)
        self.cells = cells
        self.register_buffer("mask2d", build_mask2d(num_clips, pooling_counts), persistent=False)

    def forward(self, x):
        b, h, n = x.shape
        map2d = x.new_zeros(b, h, n, n)
        map2d[:, :, range(n), range(n)] = x
        for pool, (rows, cols) in zip(self.pools, self.cells):
            x = pool(x)
            map2d[:, :, rows, cols] = x[..., : len(rows)]
        return map2d


class ReferenceTAN(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        tan = cfg.MODEL.TAN
        self.featpool = build_featpool(cfg)
        if tan.FEAT2D.NAME == "conv":  # the conv map, filled one diagonal at a time (MMN's code does it so too)
            self.feat2d = ChainMap2D("conv", tan.NUM_CLIPS, tan.FEAT2D.POOLING_COUNTS, tan.FEATPOOL.HIDDEN_SIZE)
        else:
            self.feat2d = PoolChainMap2D(tan.NUM_CLIPS, tan.FEAT2D.POOLING_COUNTS)
        self.integrator = build_integrator(cfg)
        # the dense stack of the reference, whatever PREDICTOR.STRIP_ROWS says
        self.predictor = ProposalConv(tan.FEATPOOL.HIDDEN_SIZE, tan.PREDICTOR.HIDDEN_SIZE, tan.PREDICTOR.KERNEL_SIZE,
                                      tan.PREDICTOR.NUM_STACK_LAYERS, self.feat2d.mask2d)
        self.min_iou, self.max_iou = tan.LOSS.MIN_IOU, tan.LOSS.MAX_IOU

    @property
    def mask2d(self):
        return self.feat2d.mask2d

    def forward(self, feats, queries, wordlens):
        map2d = self.feat2d(self.featpool(feats))
        return self.predictor(self.integrator(queries, wordlens, map2d))

    def loss(self, logits, stored_iou2d):
        """BCE against a precomputed [B, N, N] IoU map, masked with a bool index."""
        target = ((stored_iou2d - self.min_iou) / (self.max_iou - self.min_iou)).clamp(0, 1)
        return F.binary_cross_entropy_with_logits(logits[:, self.mask2d], target[:, self.mask2d])

    def scores(self, logits):
        return torch.sigmoid(logits) * self.mask2d


def stored_iou2d(moments, durations, num_clips):
    """What the reference's dataset keeps per query: the [N, N] IoU map, built on the CPU."""
    return iou2d(moments.float().cpu(), durations.float().cpu(), num_clips)


def reference_iou(moments, moment):
    """The reference's IoU of moments [C, 2] with one moment [2], float32: clamped
    overlap over the span from the first start to the last end."""
    inter = torch.minimum(moments[:, 1], moment[1]) - torch.maximum(moments[:, 0], moment[0])
    union = torch.maximum(moments[:, 1], moment[1]) - torch.minimum(moments[:, 0], moment[0])
    return inter.clamp(min=0) / union


def greedy_nms_one_query(scores, duration, nms_thresh, topk=5):
    """docs/metric.md §2 literally, in the reference's arithmetic: every non-zero
    cell in float32 seconds ``(bound * d) / N``, sorted by score, full greedy NMS
    on the float32 IoU of seconds (``> nms_thresh`` suppresses), first ``topk`` kept.
    Equal scores keep row-major order (the reference's sort leaves it unspecified)."""
    n = scores.shape[0]
    cells = scores.nonzero()  # [C, 2] (i, j), row-major
    values = scores[cells[:, 0], cells[:, 1]]
    cells[:, 1] += 1  # clip bounds [i, j + 1)
    moments = cells * float(duration) / n  # long * Python float: float32 product, then division
    order = torch.sort(values, descending=True, stable=True).indices
    moments, values = moments[order], values[order]
    suppressed = torch.zeros(len(order), dtype=torch.bool)
    for c in range(len(order) - 1):
        if not suppressed[c]:
            suppressed[c + 1:] |= reference_iou(moments[c + 1:], moments[c]) > nms_thresh
    kept = (~suppressed).nonzero().flatten()[:topk]
    return moments[kept], values[kept]


def reference_evaluate(scores, durations, gt_moments, nms_thresh, topk=5):
    """Per-query loop over greedy NMS, then R@k,IoU@m (float32 IoU, strictly above
    the float32 threshold, as the reference compares) and mIoU (percent)."""
    hits = {(k, m): 0 for k in RECALL_AT for m in IOU_THRESHOLDS}
    thresholds = torch.tensor(IOU_THRESHOLDS)  # float32
    miou = 0.0
    for q in range(scores.shape[0]):
        moments, _ = greedy_nms_one_query(scores[q], durations[q], nms_thresh, topk)
        ious = reference_iou(moments, gt_moments[q].float())
        miou += float(ious[0]) if len(ious) else 0.0
        for k in RECALL_AT:
            above = (ious[:k, None] > thresholds).any(dim=0)
            for m, hit in zip(IOU_THRESHOLDS, above.tolist()):
                hits[(k, m)] += hit
    q = scores.shape[0]
    results = {f"R@{k},IoU@{m}": 100.0 * hits[(k, m)] / q for k, m in hits}
    results["mIoU"] = 100.0 * miou / q
    return results
