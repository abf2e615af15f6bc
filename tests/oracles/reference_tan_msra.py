"""A baseline written the way microsoft/2D-TAN (microsoft/VideoX, folder
2D-TAN) computes things, for the equivalence tests of tan's TAN_MSRA. Nothing
in tan/ uses it.

Parameter names are its TAN's (``frame_layer.vis_conv``,
``prop_layer.layers.{scale}.{layer}``, ``fusion_layer.{textual_encoder,
tex_linear,vis_conv}``, ``map_layer.convs.{layer}``, ``pred_layer``), so a
state dict of this module is laid out as its released ``.pkl`` files are.
Done its way, in whatever dtype the module is in (nothing is moved to a GPU):

- the features pass a 1 x 1 conv, relu and an average pool;
- the 2D map is built scale by scale: each scale's chain of layers (a kernel-1
  max-pool or a 1 x 1 conv first in scale 0, a kernel-3 stride-2 layer first
  in a later scale, kernel-2 stride-1 layers after) yields one diagonal per
  layer, written into the full map at the scale's stride and accumulated
  offset (its code goes through a map per scale; the cells are the same);
- the sentence's LSTM runs over the padded words (no packing), its outputs
  are multiplied by the word mask and read at the last real word;
- fusion is F.normalize(linear(sentence) * conv1x1(map)) * mask;
- each map conv is relu(conv(x)) times the weight map recomputed from the
  mask on every call; the head is conv1x1(x) * mask;
- the loss is the BCE of sigmoid(prediction) * mask against the rescaled IoU
  map of the cells' float32 times, summed over the mask and divided by its sum.

The data and evaluation arithmetic follow lib/datasets (average_to_fixed_length,
the IoU maps of __getitem__), moment_localization/test.py
(get_proposal_results) and lib/core/eval.py (iou, nms, eval).
"""
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


# ---------------------------------------------------------------- the model

class FrameAvgPool(nn.Module):
    def __init__(self, input_size, hidden_size, kernel_size, stride):
        super().__init__()
        self.vis_conv = nn.Conv1d(input_size, hidden_size, 1, 1)
        self.avg_pool = nn.AvgPool1d(kernel_size, stride)

    def forward(self, visual_input):
        return self.avg_pool(torch.relu(self.vis_conv(visual_input)))


def scale_layers(num_scale_layers, make_layer):
    """Per scale, its chain: ``make_layer(kernel, stride)`` for (1, 1) or (3, 2) first, then (2, 1)."""
    layers = nn.ModuleList()
    for scale_idx, num_layer in enumerate(num_scale_layers):
        first = make_layer(1, 1) if scale_idx == 0 else make_layer(3, 2)
        layers.append(nn.ModuleList([first] + [make_layer(2, 1) for _ in range(1, num_layer)]))
    return layers


def layer_stride(layer):
    stride = layer.stride
    return stride[0] if isinstance(stride, tuple) else stride


class SparseProp(nn.Module):
    """Its SparsePropMaxPool (``layers`` of max-pools) or SparsePropConv (``layers`` of convs)."""

    def __init__(self, num_scale_layers, hidden_size=None):
        super().__init__()
        self.num_scale_layers = num_scale_layers
        if hidden_size is None:
            self.layers = scale_layers(num_scale_layers, lambda k, s: nn.MaxPool1d(k, s))
        else:
            self.layers = scale_layers(num_scale_layers, lambda k, s: nn.Conv1d(hidden_size, hidden_size, k, s))

    def forward(self, x):
        """[B, C, N] clips -> the [B, C, N, N] map and its [B, 1, N, N] mask (both of x's dtype).

        The scales' chains run one after the other, each on the last output of the one
        before. In the full map a cell of the current scale is ``step`` clips wide (the
        product of every stride met so far) and its diagonal ``depth`` lies ``offset +
        depth * step`` clips right of the main diagonal, ``offset`` growing by ``step *
        (chain length + 1)`` after each scale. So the s-th value of layer ``depth``'s
        output goes to row ``s * step`` of that diagonal, for every row left of
        ``N - (offset + depth * step)``. Its code first fills one map per scale and then
        copies that map's diagonals into the full one; the values are the same, placed
        here directly and in the same order (a later write over an earlier one). An
        output of one value is spread over the scale's ``cells - depth`` cells, as its
        per-scale assignment broadcasts it.
        """
        batch, channels, side = x.shape
        full = x.new_zeros(batch, channels, side, side)
        valid = x.new_zeros(batch, 1, side, side)
        offset, step = 0, 1
        for chain in self.layers:
            cells = x.shape[-1] // layer_stride(chain[0])  # the scale's own map is cells x cells
            for depth, layer in enumerate(chain):
                x = layer(x)
                step *= layer_stride(layer)
                shift = offset + depth * step
                rows = torch.arange(0, max(side - shift, 0), step, device=x.device)
                full[:, :, rows, rows + shift] = x.expand(-1, -1, max(cells - depth, 0))
                valid[:, :, rows, rows + shift] = 1
            offset += step * (len(chain) + 1)
        return full, valid


class BaseFusion(nn.Module):
    def __init__(self, hidden_size, txt_input_size, txt_hidden_size, num_layers, bidirectional):
        super().__init__()
        self.textual_encoder = nn.LSTM(txt_input_size, txt_hidden_size // 2 if bidirectional else txt_hidden_size,
                                       num_layers=num_layers, bidirectional=bidirectional, batch_first=True)
        self.tex_linear = nn.Linear(txt_hidden_size, hidden_size)
        self.vis_conv = nn.Conv2d(hidden_size, hidden_size, 1, 1)

    def forward(self, textual_input, textual_mask, map_h, map_mask):
        """normalize(sentence vector x conv1x1(map), over the channels) x map mask.

        The LSTM reads the padded words unpacked; its outputs, multiplied by the word
        mask [B, L, 1], are taken at the last real word, index (number of ones) - 1, so
        a sentence with an empty mask takes the last position, as index -1 does.
        """
        states = self.textual_encoder(textual_input)[0] * textual_mask  # [B, L, H]
        last_word = textual_mask.flatten(1).sum(dim=1).long() - 1
        sentence = self.tex_linear(states[torch.arange(states.shape[0]), last_word])  # [B, hidden]
        product = sentence[:, :, None, None] * self.vis_conv(map_h)
        return F.normalize(product, dim=1) * map_mask


def get_padded_mask_and_weight(mask, conv):
    """(next mask, weight map) of ``conv``'s output, from the mask of its input.

    A cell's count is the number of valid input cells under its kernel:
    round(conv2d(mask as float32, float32 ones of ``conv.kernel_size``)) with ``conv``'s
    stride, padding and dilation. Its weight is the float32 reciprocal 1 / count where
    the count is positive (in torch ``1 / tensor`` is ``tensor.reciprocal()``; its code
    takes it on the GPU), and the other cells keep their count, 0. The next mask is
    weight > 0. tan's build_weight_maps and masked_weights must give these values
    exactly (tests/test_tan_msra.py).
    """
    ones = torch.ones(1, 1, *conv.kernel_size, dtype=torch.float32, device=mask.device)
    counts = F.conv2d(mask.float(), ones, stride=conv.stride, padding=conv.padding, dilation=conv.dilation).round()
    weights = torch.where(counts > 0, counts.reciprocal(), counts)
    return weights > 0, weights


class MapConv(nn.Module):
    def __init__(self, input_size, hidden_sizes, kernel_sizes, strides, paddings, dilations):
        super().__init__()
        channel_sizes = [input_size] + list(hidden_sizes)
        self.convs = nn.ModuleList(nn.Conv2d(channel_sizes[i], channel_sizes[i + 1], k, s, p, d)
                                   for i, (k, s, p, d) in enumerate(zip(kernel_sizes, strides, paddings, dilations)))

    def forward(self, x, mask):
        """relu(conv(x)) times that conv's weight map, layer by layer; the weight maps are
        recomputed from the mask on every call, each from the mask the previous one left."""
        for conv in self.convs:
            mask, weights = get_padded_mask_and_weight(mask, conv)
            x = F.relu(conv(x)) * weights.to(x.dtype)
        return x


class TAN(nn.Module):
    """Its TAN, built from MODEL.TAN_MSRA of a tan config (``node``) and the word size."""

    def __init__(self, node, txt_input_size):
        super().__init__()
        frame, prop, fusion, maps = node.FRAME_MODULE, node.PROP_MODULE, node.FUSION_MODULE, node.MAP_MODULE
        hidden = frame.HIDDEN_SIZE
        self.frame_layer = FrameAvgPool(frame.INPUT_SIZE, hidden, frame.KERNEL_SIZE, frame.STRIDE)
        self.prop_layer = SparseProp(list(prop.NUM_SCALE_LAYERS), hidden if prop.NAME == "SparsePropConv" else None)
        self.fusion_layer = BaseFusion(hidden, txt_input_size, fusion.TXT_HIDDEN_SIZE, fusion.LSTM.NUM_LAYERS,
                                       fusion.LSTM.BIDIRECTIONAL)
        self.map_layer = MapConv(hidden, maps.HIDDEN_SIZES, maps.KERNEL_SIZES, maps.STRIDES, maps.PADDINGS,
                                 maps.DILATIONS)
        self.pred_layer = nn.Conv2d(maps.HIDDEN_SIZES[-1], 1, 1, 1)

    def forward(self, textual_input, textual_mask, visual_input):
        """(logits [B, 1, N, N], zero outside the mask; the map mask [B, 1, N, N])."""
        clips = self.frame_layer(visual_input.transpose(1, 2))  # [B, hidden, N]
        cells, valid = self.prop_layer(clips)
        joint = self.map_layer(self.fusion_layer(textual_input, textual_mask, cells, valid), valid)
        return self.pred_layer(joint) * valid, valid


def bce_rescale_loss(scores, masks, targets, min_iou, max_iou, bias):
    """(loss, sigmoid(scores) x masks). The IoU targets are mapped linearly so that
    ``min_iou`` -> 0 and ``max_iou`` -> 1 - ``bias``, ``bias`` is added to every positive
    value and the result is cut to [0, 1]; the loss is the elementwise BCE of the masked
    probabilities against them, masked, summed and divided by the mask's sum."""
    probs = torch.sigmoid(scores) * masks
    scaled = (targets - min_iou) * (1 - bias) / (max_iou - min_iou)
    raised = torch.where(scaled > 0, scaled + bias, scaled)
    soft = raised.masked_fill(raised > 1, 1.0).masked_fill(raised < 0, 0.0)
    elementwise = F.binary_cross_entropy(probs, soft, reduction="none") * masks
    return elementwise.sum() / masks.sum(), probs


# ---------------------------------------------------------------- data

def normalize_and_average(features, num_sample_clips, normalize=True):
    """Its datasets' clip features: the rows [T, C] L2-normalised by F.normalize (when
    DATASET.NORMALIZE), then averaged into ``num_sample_clips`` = P buckets
    (average_to_fixed_length).

    Bucket k holds rows [b_k, b_k+1): b_k = round(k / P * T) in float32 tensors, the
    quotient k / P rounded to float32 before the product (a true division on the CPU,
    where its datasets run), rounded half to even and clamped to T - 1, so the last
    row belongs to no bucket unless an empty one falls on it. A bucket with rows is
    torch.mean of its own slice along dim 0, one call per bucket: a running sum, or a
    mean over another layout, can round differently in the last bit. An empty bucket
    (b_k >= b_k+1) is row b_k itself. tan's AveragedClips must equal this bit for bit.
    """
    rows = F.normalize(features, dim=1) if normalize else features
    total = rows.shape[0]
    positions = torch.arange(num_sample_clips + 1, dtype=torch.float32) / num_sample_clips * total
    edges = torch.round(positions).long().clamp(max=total - 1)
    first, stop = edges[:-1], edges[1:]
    empty = first >= stop
    clips = rows.new_empty(num_sample_clips, *rows.shape[1:])
    clips[empty] = rows[first[empty]]
    for k, (lo, hi) in enumerate(zip(first.tolist(), stop.tolist())):
        if lo < hi:
            clips[k] = rows[lo:hi].mean(dim=0)
    return clips


def iou(pred, gt):
    """Its lib/core/eval.py iou, in numpy (float64 for Python floats): ``pred`` and ``gt``
    are one [start, end] or a list of them; the result is [P, G], [P], [G] or a number.

    The intersection is min(ends) - max(starts) and the union the hull max(ends) -
    min(starts), both cut at 0 below (for disjoint moments the hull is not their union,
    but the intersection is 0, so the ratio is too); the ratio is rounded once.
    """
    many_preds, many_gts = isinstance(pred[0], list), isinstance(gt[0], list)
    a = np.array(pred if many_preds else [pred])  # [P, 2]
    b = np.array(gt if many_gts else [gt])  # [G, 2]
    a_start, a_end = a[:, :1], a[:, 1:]  # [P, 1], against b's [G]
    common = np.maximum(0.0, np.minimum(a_end, b[:, 1]) - np.maximum(a_start, b[:, 0]))
    hull = np.maximum(0.0, np.maximum(a_end, b[:, 1]) - np.minimum(a_start, b[:, 0]))
    ratio = common / hull
    return ratio[slice(None) if many_preds else 0, slice(None) if many_gts else 0]


def overlap_map(duration, gt_s_time, gt_e_time, num_clips, dtype=torch.float32):
    """Its __getitem__'s map_gt: the IoU (numpy float64) of every cell's times with the ground
    truth, both made tensors of ``dtype`` first (float32 in its datasets); [N, N] float64."""
    s_times = torch.arange(0, num_clips).to(dtype) * duration / num_clips
    e_times = torch.arange(1, num_clips + 1).to(dtype) * duration / num_clips
    cells = torch.stack([s_times[:, None].expand(-1, num_clips), e_times[None, :].expand(num_clips, -1)], dim=2)
    overlaps = iou(cells.view(-1, 2).tolist(), torch.tensor([gt_s_time, gt_e_time], dtype=dtype).tolist())
    return overlaps.reshape(num_clips, num_clips)


# ---------------------------------------------------------------- evaluation

def get_proposal_results(scores, durations, target_size):
    """Its test loop's proposals: per map, every cell (i, j) with i <= j, masked cells
    included, as the float32 seconds [i, j + 1] / target_size * duration (lists).

    The order is that of numpy's argsort (default kind) of the flattened map in its own
    dtype, reversed; equal scores come in whatever order that sort leaves them, so the
    same call has to be made to get the same order (tan's ranking makes it). The
    division is a true division by a Python number on the CPU; its code divides on the
    GPU, which multiplies by the float32 reciprocal instead (tan's reference_seconds
    does that). The two agree whenever target_size is a power of two, as in every map
    the tests evaluate (16 x 16), and can differ in the last bit otherwise.
    """
    proposals = []
    for score, duration in zip(scores, durations):
        side = score.shape[-1]
        descending = np.argsort(score.cpu().detach().numpy().ravel())[::-1]
        i, j = np.unravel_index(descending, (side, side))
        upper = i <= j
        spans = np.stack([i[upper], j[upper] + 1], axis=1).astype(np.float32)  # small integers: exact
        proposals.append((torch.from_numpy(spans) / target_size * duration).tolist())
    return proposals


def nms(dets, thresh=0.4, top_k=-1):
    """Its eval.py nms: greedy over ``dets`` (moments [start, end], best first) in numpy
    (float64 for Python floats). A moment is kept unless its overlap with one already
    kept, inter / (len_kept + len_it - inter), is greater than ``thresh`` or NaN; it
    stops after ``top_k`` kept. Returns the kept moments [K, 2] (``[]`` for no moments).
    """
    if len(dets) == 0:
        return []
    moments = np.array(dets)
    starts, ends = moments[:, 0], moments[:, 1]
    lengths = ends - starts
    alive = np.ones(len(moments), dtype=bool)
    chosen = []
    for head in range(len(moments)):
        if not alive[head]:
            continue
        chosen.append(head)
        if len(chosen) == top_k:
            break
        rest = head + 1 + np.flatnonzero(alive[head + 1:])  # the moments no kept one has suppressed yet
        shared = np.maximum(0.0, np.minimum(ends[head], ends[rest]) - np.maximum(starts[head], starts[rest]))
        alive[rest] = shared / (lengths[head] + lengths[rest] - shared) <= thresh
    return moments[chosen]


def evaluate(segments, gt_times, nms_thresh, tious=(0.1, 0.3, 0.5, 0.7), recalls=(1, 5)):
    """Its eval(): ``segments`` per query (sorted proposals), ``gt_times`` [start, end] per query;
    returns ({"R@k,IoU@m": percent}, mIoU percent) and the kept moments per query."""
    eval_result = [[[] for _ in recalls] for _ in tious]
    max_recall = max(recalls)
    average_iou, kept = [], []
    for seg, times in zip(segments, gt_times):
        seg = nms(seg, thresh=nms_thresh, top_k=max_recall).tolist()
        kept.append(seg)
        overlap = iou(seg, [list(times)])
        average_iou.append(np.mean(np.sort(overlap[0])[-3:]))
        for i, t in enumerate(tious):
            for j, r in enumerate(recalls):
                eval_result[i][j].append((overlap > t)[:r].any())
    eval_result = np.array(eval_result).mean(axis=-1)
    table = {f"R@{r},IoU@{t}": 100.0 * eval_result[i][j] for i, t in enumerate(tious) for j, r in enumerate(recalls)}
    return table, 100.0 * np.mean(average_iou), kept
