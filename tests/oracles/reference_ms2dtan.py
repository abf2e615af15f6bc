"""A baseline written the way microsoft/VideoX MS-2D-TAN computes things, for
equivalence tests and side-by-side benchmarks; nothing in tan/ uses it.

The model's ``state_dict()`` has the names and shapes of MS-2D-TAN's
``MultiScale_TAN`` (``clip_module.vis_conv``, ``prop_module.layers.S.I.{0,1}``,
``fusion_module.{textual_encoder,tex_linear,vis_conv}``,
``map_modules.S.blocks.L.{0,1}`` or ``map_modules.S.convs.L``,
``pred_modules.S.predictor``), so its checkpoints load as they are. Done its
way, and in whatever dtype the module is in (no ``.cuda()``):

- the clip features pass a 1x1 conv, relu and an average pool; a clip counts
  only where its whole pooling window is real (pooled mask == 1);
- scale 0's anchor i (i + 1 clips) is the output of layer i of a chain: a
  (kernel 1, stride 1) layer, then (2, 1) layers, each conv + BatchNorm +
  tanh (max-pools for MultiScalePropMaxPool), times the pooled mask. Each
  coarser scale copies its first half of anchors from the odd anchors of the
  previous scale's even rows, and fills its second half by continuing the
  chain from the previous scale's last output with a (3, 2) layer, then
  (2, 1) layers: x and the clip mask are carried across scales;
- BatchNorm sees every position, padded clips included;
- the sentence is re-encoded for every scale by an LSTM run over the padded
  words (no packing), then averaged over the real words;
- fusion is F.normalize(linear(sentence) * conv1x1(map)) * mask; the map
  convs (gated: relu(conv) * sigmoid(gate conv); or plain relu convs for
  DS-2D-TAN's "Conv") apply no mask between layers;
- the head is sigmoid(conv1x1(x) * mask), multiplied by the mask once more.

The data, loss and evaluation arithmetic follow moment_localization/run.py,
eval.py and lib/datasets/dataset.py: the candidate times of the IoU maps and
of the proposals are computed in float32 (the IoU itself in float64, numpy);
the proposals' top-k takes as many cells as the batch's FIRST map has valid
ones; NMS and the R@k,IoU@m table are numpy. ``pos_emb`` (collated by the
reference, read by no model) and the unused IoA maps are left out.
"""
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


# ---------------------------------------------------------------- the model

class ClipAvgPool(nn.Module):
    def __init__(self, input_size, hidden_size, kernel_size, stride, groups=1):
        super().__init__()
        self.vis_conv = nn.Conv1d(input_size * groups, hidden_size * groups, 1, 1, groups=groups)
        self.avg_pool = nn.AvgPool1d(kernel_size, stride)

    def forward(self, x, mask):
        h = self.avg_pool(self.vis_conv(x).relu())
        k, s = self.avg_pool.kernel_size[0], self.avg_pool.stride[0]
        mask = (F.avg_pool1d(mask, k, s) == 1).to(h.dtype)
        return h * mask, mask


def prop_steps(num_layers):
    """(kernel, stride) of each layer, per scale: (1, 1) first on scale 0, (3, 2)
    first on the others, (2, 1) after. The clip mask is pooled the same way."""
    return [[(1, 1) if i == 0 and s == 0 else (3, 2) if i == 0 else (2, 1) for i in range(n)]
            for s, n in enumerate(num_layers)]


class MultiScaleProp(nn.Module):
    def __init__(self, name, hidden_size, num_layers):
        super().__init__()
        if any(2 * n != num_layers[0] for n in num_layers[1:]):
            # the copied half (odd anchors of the previous scale) must fill exactly half
            raise ValueError(f"NUM_LAYERS must be [2n, n, n, ...], not {num_layers}")

        def layer(k, s):
            if name == "MultiScalePropMaxPool":
                return nn.MaxPool1d(k, s)
            if name == "MultiScalePropConvTanhBN":
                return nn.Sequential(nn.Conv1d(hidden_size, hidden_size, k, s), nn.BatchNorm1d(hidden_size), nn.Tanh())
            raise ValueError(f"unknown PROP_MODULE {name!r}")

        self.steps = prop_steps(num_layers)
        self.layers = nn.ModuleList(nn.ModuleList(layer(k, s) for k, s in scale) for scale in self.steps)

    def forward(self, x, mask):
        b, h, size = x.shape
        maps, masks = [], []
        for s, (layers, steps) in enumerate(zip(self.layers, self.steps)):
            rows = size // 2 ** s
            anchors = len(layers) * (1 if s == 0 else 2)
            first = 0 if s == 0 else anchors // 2
            map_h = x.new_zeros(b, h, rows, anchors)
            map_mask = x.new_zeros(b, 1, rows, anchors)
            if s > 0:
                map_h[..., :first] = maps[-1][:, :, :rows * 2:2, 1::2]
                map_mask[..., :first] = masks[-1][:, :, :rows * 2:2, 1::2]
            for i, (layer, (k, st)) in enumerate(zip(layers, steps)):
                mask = (F.avg_pool1d(mask, k, st) == 1).to(x.dtype)
                x = layer(x) * mask
                n = x.shape[-1]
                map_h[:, :, :n, first + i] = x
                map_mask[:, :, :n, first + i] = mask[..., :n]
            maps.append(map_h)
            masks.append(map_mask)
        return maps, masks


class MulNormFusion(nn.Module):
    def __init__(self, vis_size, hidden_size, txt_input_size, txt_hidden_size, txt_layers, txt_bidirectional):
        super().__init__()
        per_direction = txt_hidden_size // 2 if txt_bidirectional else txt_hidden_size
        self.textual_encoder = nn.LSTM(txt_input_size, per_direction, num_layers=txt_layers,
                                       bidirectional=txt_bidirectional, batch_first=True)
        self.tex_linear = nn.Linear(txt_hidden_size, hidden_size)
        self.vis_conv = nn.Conv2d(vis_size, hidden_size, 1, 1)

    def forward(self, words, txt_mask, map_h, map_mask):
        self.textual_encoder.flatten_parameters()
        txt = (self.textual_encoder(words)[0] * txt_mask).sum(dim=1) / txt_mask.sum(dim=1)
        txt = self.tex_linear(txt)[:, :, None, None]
        return F.normalize(txt * self.vis_conv(map_h)) * map_mask


class MapGatedConv(nn.Module):
    def __init__(self, input_size, hidden_sizes, kernel_sizes, paddings):
        super().__init__()
        ins = [input_size] + list(hidden_sizes[:-1])
        self.blocks = nn.ModuleList(nn.ModuleList([nn.Conv2d(i, o, k, 1, p), nn.Conv2d(i, 1, k, 1, p)])
                                    for i, o, k, p in zip(ins, hidden_sizes, kernel_sizes, paddings))

    def forward(self, x):
        for conv, gate_conv in self.blocks:
            gate = torch.sigmoid(gate_conv(x))  # one gate per group; one group here
            x = torch.relu(conv(x)) * gate
        return x


class MapConv(nn.Module):
    """DS-2D-TAN's "Conv": relu convs, no mask."""

    def __init__(self, input_size, hidden_sizes, kernel_sizes, paddings):
        super().__init__()
        sizes = [input_size] + list(hidden_sizes)
        self.convs = nn.ModuleList(nn.Conv2d(sizes[i], sizes[i + 1], k, 1, p)
                                   for i, (k, p) in enumerate(zip(kernel_sizes, paddings)))

    def forward(self, x):
        for conv in self.convs:
            x = torch.relu(conv(x))
        return x


class ProposalHead(nn.Module):
    def __init__(self, input_size):
        super().__init__()
        self.predictor = nn.Conv2d(input_size, 1, 1, 1)

    def forward(self, x, mask):
        # masked cells come out as sigmoid(0) = 0.5; the caller multiplies by the mask again
        return torch.sigmoid(self.predictor(x) * mask)


class ReferenceMS2DTAN(nn.Module):
    """MS-2D-TAN's MultiScale_TAN from plain arguments (the experiments' values:
    hidden_size 512, clip_kernel = clip_stride = 1 (4 or 6 on VGG), num_layers
    [16, 8, 8] or [8, 4, 4, 4, 4] ([64] for DS-2D-TAN), txt 300 -> 512, 3
    layers, bidirectional, map kernels 17 (padding 8) or 9 (padding 4)).
    ``groups`` is ClipAvgPool's GROUPS: the features are repeated that many
    times and convolved per group, and the layers after it see
    hidden_size * groups channels (a reference config with PROP HIDDEN_SIZE =
    FUSION VIS_INPUT_SIZE = HIDDEN * GROUPS)."""

    def __init__(self, *, input_size, hidden_size, num_layers, txt_input_size, txt_hidden_size,
                 txt_layers, txt_bidirectional, map_hidden_sizes, map_kernel_sizes, map_paddings,
                 clip_kernel=1, clip_stride=1, groups=1, prop="MultiScalePropConvTanhBN", map="MapGatedConv"):
        super().__init__()
        self.groups = groups
        vis_size = hidden_size * groups
        maps = {"MapGatedConv": MapGatedConv, "Conv": MapConv}
        if map not in maps:
            raise ValueError(f"unknown MAP_MODULE {map!r}")
        self.clip_module = ClipAvgPool(input_size, hidden_size, clip_kernel, clip_stride, groups)
        self.prop_module = MultiScaleProp(prop, vis_size, num_layers)
        self.fusion_module = MulNormFusion(vis_size, hidden_size, txt_input_size, txt_hidden_size,
                                           txt_layers, txt_bidirectional)
        self.map_modules = nn.ModuleList(maps[map](hidden_size, map_hidden_sizes, map_kernel_sizes, map_paddings)
                                         for _ in num_layers)
        self.pred_modules = nn.ModuleList(ProposalHead(map_hidden_sizes[-1]) for _ in num_layers)

    def forward(self, word_vectors, txt_mask, video_features, vis_mask):
        """word_vectors [B, L, E], txt_mask [B, L, 1], video_features [B, D, T],
        vis_mask [B, 1, T] -> (predictions, masks): per scale [B, 1, N_s, A_s],
        N_s = N_0 // 2**s, A_0 = num_layers[0], A_s = 2 * num_layers[s]."""
        if self.groups > 1:
            video_features = torch.cat([video_features] * self.groups, dim=1)
        vis_h, clip_mask = self.clip_module(video_features, vis_mask)
        prop_hs, map_masks = self.prop_module(vis_h, clip_mask)
        predictions = []
        for map_module, pred_module, prop_h, map_mask in zip(self.map_modules, self.pred_modules,
                                                             prop_hs, map_masks):
            fused = self.fusion_module(word_vectors, txt_mask, prop_h, map_mask)
            predictions.append(pred_module(map_module(fused), map_mask) * map_mask)
        return predictions, map_masks


# ----------------------------------------------------------------- the loss

def bce_rescale_loss(scores, masks, targets, min_iou=0.5, max_iou=1.0, bias=0.0):
    """Its loss on probabilities: each cell's IoU mapped linearly so that min_iou
    gives 0 and max_iou gives 1, positives raised by ``bias``, all clamped to
    [0, 1]; the BCE of every masked cell summed and divided by the number of
    masked cells (the mask counted over all its rows; the scores and mask are
    first cut to the target's rows, which changes nothing in its experiments)."""
    wanted = (targets - min_iou) * (1 - bias) / (max_iou - min_iou)  # its order of operations
    wanted = torch.where(wanted > 0, wanted + bias, wanted).clamp(0, 1)
    kept = targets.shape[2]
    per_cell = F.binary_cross_entropy(scores[:, :, :kept], wanted, reduction="none")
    return (per_cell * masks[:, :, :kept]).sum() / masks.sum()


def total_loss(predictions, masks, targets_list, min_iou=0.5, max_iou=1.0, bias=0.0):
    """run.py's network(): the per-scale losses summed, unweighted."""
    loss = 0
    for prediction, mask, targets in zip(predictions, masks, targets_list):
        loss = loss + bce_rescale_loss(prediction, mask, targets, min_iou, max_iou, bias)
    return loss


def recover_to_single_map(per_scale):
    """Per-scale [B, 1, N_s, A_s] -> [B, 1, N, N] (N = N_0), start x duration in
    scale-0 cells: scale s (cells of d = N // N_s) writes anchor i to column
    (i + 1) * d - 1 of every d-th row, keeping the max over scales; cells no
    scale covers stay 0. Same device and dtype as the input."""
    b, _, size, _ = per_scale[0].shape
    out = per_scale[0].new_zeros(b, 1, size, size)
    for prob in per_scale:
        rows, anchors = prob.shape[2:]
        d = size // rows
        for i in range(anchors):
            cells = (..., slice(None, size // d * d, d), (i + 1) * d - 1)
            out[cells] = torch.max(out[cells].clone(), prob[..., i])
    return out


# ------------------------------------------------------------------ the data

def video_features(feats, normalize=True):
    """get_video_features after reading: [T, D] features (L2-normalised over D
    when NORMALIZE, its default and every experiment's) and a [T, 1] mask of
    ones. The reference reads float32; this keeps the input's dtype."""
    if normalize:
        feats = F.normalize(feats, dim=1)
    return feats, feats.new_ones(feats.shape[0], 1)


def feature_temporal_sampling(num_samples, feats):
    """[T, ...] -> [num_samples, ...]: for bucket k the row halfway between its
    bounds, the bounds being k T / num_samples computed in float32 (k / num_samples
    first), rounded half to even and capped at T - 1, so rows repeat when T is
    smaller than num_samples."""
    length = feats.shape[0]
    edges = (torch.arange(num_samples + 1, dtype=torch.float32) / num_samples * length).round().long()
    edges = edges.clamp(max=length - 1)
    return feats[torch.div(edges[:-1] + edges[1:], 2, rounding_mode="floor")]


def pairwise_iou(pred, gt):
    """numpy [P, 2] x [G, 2] -> [P, G], as lib/core/utils.iou (float64)."""
    pred, gt = np.asarray(pred, dtype=np.float64), np.asarray(gt, dtype=np.float64)
    inter = np.maximum(0.0, np.minimum(pred[:, 1, None], gt[None, :, 1]) - np.maximum(pred[:, 0, None], gt[None, :, 0]))
    union = np.maximum(0.0, np.maximum(pred[:, 1, None], gt[None, :, 1]) - np.minimum(pred[:, 0, None], gt[None, :, 0]))
    return 1.0 * inter / union


def iou_map(gt_times, duration, num_clips, num_anchors):
    """[num_clips, num_anchors] float64 tensor: cell (r, a) is the moment from
    r * duration / num_clips lasting (a + 1) * duration / num_clips, those times
    and the ground truth in float32, the IoU in float64. A cell ending past the
    grid is 0, except on row 0: its code clears rows num_clips - 1 down to 1
    only, so with num_anchors > num_clips row 0 keeps IoUs of moments longer
    than the grid."""
    row = torch.arange(num_clips, dtype=torch.float32)
    span = torch.arange(1, num_anchors + 1, dtype=torch.float32)
    first = (row * duration / num_clips)[:, None].expand(num_clips, num_anchors)
    last = first + (span * duration / num_clips)[None, :]
    truth = [float(t) for t in torch.tensor(list(gt_times[:2]), dtype=torch.float32)]
    pairs = torch.stack([first, last], dim=-1).reshape(-1, 2).tolist()
    grid = pairwise_iou(pairs, [truth])[:, 0].reshape(num_clips, num_anchors)
    r, a = np.meshgrid(np.arange(num_clips), np.arange(num_anchors), indexing="ij")
    grid[(r >= 1) & (r + a >= num_clips)] = 0  # past the end, row 0 spared
    return torch.from_numpy(grid)


def sliding_window_item(feats, gt, duration, time_unit, input_num_clips, output_num_clips, num_anchors,
                        train, window_start=0, normalize=True):
    """get_sliding_window_item (SLIDING_WINDOW True, list OUTPUT_NUM_CLIPS /
    NUM_ANCHORS): feats [T, D] -> (video features [T', D], vis_mask [T', 1],
    per-scale map_gt [rows_s, A_s] float64). Scale s has downsample rate
    dr = input_num_clips // output_num_clips[s].

    - train, T >= input_num_clips: the window [window_start, + input_num_clips)
      (the reference draws random.randrange(T - input_num_clips), so never the
      last start, and 0 when T == input_num_clips); the ground truth is shifted
      by window_start * time_unit; each map has output_num_clips[s] rows over
      time_unit * dr * output_num_clips[s] seconds (moments outside the window
      are not clipped).
    - otherwise (test, or a train video shorter than the window): the whole
      video; each map has rows = max(T // dr, 1) over time_unit * dr * rows
      seconds; when T < input_num_clips, features and mask are zero-padded to
      input_num_clips rows and each map to output_num_clips[s] rows. A test
      video longer than the window stays whole (T rows, T // dr map rows).

    ``duration`` only feeds the reference's pos_emb, which no model reads."""
    feats, mask = video_features(feats, normalize)
    n = feats.shape[0]
    gt_s, gt_e = gt
    maps = []
    if train and n >= input_num_clips:
        assert 0 <= window_start <= n - input_num_clips, window_start
        feats = feats[window_start:window_start + input_num_clips]
        mask = mask[window_start:window_start + input_num_clips]
        gt_s, gt_e = gt_s - window_start * time_unit, gt_e - window_start * time_unit
        for out, anchors in zip(output_num_clips, num_anchors):
            dr = input_num_clips // out
            maps.append(iou_map([gt_s, gt_e], time_unit * dr * out, out, anchors))
        return feats, mask, maps
    assert not train or window_start == 0, window_start
    for out, anchors in zip(output_num_clips, num_anchors):
        dr = input_num_clips // out
        rows = max(n // dr, 1)
        overlaps = iou_map([gt_s, gt_e], time_unit * dr * rows, rows, anchors)
        if input_num_clips > n:
            overlaps = F.pad(overlaps, [0, 0, 0, out - rows])
        maps.append(overlaps)
    if input_num_clips > n:
        feats = F.pad(feats, [0, 0, 0, input_num_clips - n])
        mask = F.pad(mask, [0, 0, 0, input_num_clips - n])
    return feats, mask, maps


def sampling_item(feats, gt, duration, input_num_clips, output_num_clips, num_anchors, normalize=True):
    """get_sampling_item (SLIDING_WINDOW False): feats [T, D] -> (features
    [input_num_clips, D] by feature_temporal_sampling, vis_mask of ones
    [input_num_clips, 1], per-scale map_gt [output_num_clips[s], A_s] over the
    annotated ``duration``)."""
    feats, mask = video_features(feats, normalize)
    maps = [iou_map(gt, duration, out, anchors) for out, anchors in zip(output_num_clips, num_anchors)]
    return (feature_temporal_sampling(input_num_clips, feats),
            feature_temporal_sampling(input_num_clips, mask), maps)


def collate(items, dtype=torch.float32):
    """run.py's collate_fn on items (word_vectors [L, E], txt_mask [L, 1] (ones),
    video features [T, D], vis_mask [T, 1], per-scale map_gt) -> (word_vectors
    [B, L, E], txt_mask [B, L, 1], video_features [B, D, T], vis_mask [B, 1, T],
    per-scale map_gt [B, 1, N_s, A_s]), all zero-padded to the batch's longest.
    The reference casts the last three to float32 (``dtype``); the words keep theirs."""
    words, txt_masks, feats, vis_masks, maps = zip(*items)
    pad = nn.utils.rnn.pad_sequence
    return (pad(list(words), batch_first=True), pad(list(txt_masks), batch_first=True),
            pad(list(feats), batch_first=True).to(dtype).transpose(1, 2),
            pad(list(vis_masks), batch_first=True).to(dtype).transpose(1, 2),
            [pad(list(m), batch_first=True).to(dtype)[:, None] for m in zip(*maps)])


# ------------------------------------------------------------ the evaluation

def proposal_time_unit(time_unit, input_num_clips, output_num_clips):
    """Seconds per cell of the recovered map, as network() passes to the
    sliding-window proposals: TIME_UNIT * INPUT_NUM_CLIPS / OUTPUT_NUM_CLIPS[0]."""
    return time_unit * input_num_clips / output_num_clips[0]


def _top_cells(score_map, mask_map):
    # k is the number of valid cells of the batch's FIRST map, for every map:
    # other maps lose valid cells or gain zero-score invalid ones. Its torch.topk
    # leaves the order of equal scores unspecified (saturated tanh features give
    # exact ties); here they are in cell order, as tan orders them, so that the
    # two can be compared at all.
    b = score_map.shape[0]
    k = torch.sum(mask_map[0] > 0).item()
    return torch.sort(score_map.detach().cpu().reshape(b, -1), dim=1, descending=True, stable=True)[1][:, :k]


def _nms_each(starts, ends, nms_thresh, top_k):
    out = []
    for s, e in zip(starts, ends):
        keep = s < e
        out.append(nms(torch.stack([s[keep], e[keep]], dim=1).tolist(), nms_thresh, top_k))
    return out


def sliding_window_proposals(score_map, mask_map, time_unit, nms_thresh=0.49, top_k=5):
    """get_sw_proposal_results: recovered [B, 1, N, N] scores and mask -> per map
    a list of at most top_k [start, end] in seconds from the window's start,
    cell (i, j) = [i, i + j + 1) * time_unit in float32. ``time_unit`` is
    proposal_time_unit(): TIME_UNIT * INPUT_NUM_CLIPS / OUTPUT_NUM_CLIPS[0].
    The experiments' NMS_THRESH is 0.49 and max(RECALL) 5."""
    cols = score_map.shape[-1]
    index = _top_cells(score_map, mask_map)
    starts = (index // cols).float() * time_unit
    ends = starts + (index % cols + 1).float() * time_unit
    return _nms_each(starts, ends, nms_thresh, top_k)


def duration_proposals(score_map, mask_map, durations, nms_thresh=0.49, top_k=5):
    """get_proposal_results (SLIDING_WINDOW False): as sliding_window_proposals,
    cell (i, j) = [i / N * duration, + (j + 1) / N * duration], float32."""
    b, _, rows, cols = score_map.shape
    index = _top_cells(score_map, mask_map)
    d = torch.tensor(durations, dtype=torch.float32).view(b, 1)
    starts = (index // cols).float() / rows * d
    ends = starts + (index % cols + 1).float() / rows * d
    return _nms_each(starts, ends, nms_thresh, top_k)


def nms(dets, thresh=0.4, top_k=-1):
    """Its numpy NMS over [start, end] pairs already in score order (float64):
    walk them in order, keep one unless its IoU with a moment kept before it
    exceeds ``thresh``, stop once ``top_k`` are kept. (Its code drops, after
    each kept one, the rest that it overlaps; the decisions are the same.)"""
    if not len(dets):
        return []
    moments = np.asarray(dets, dtype=np.float64)
    assert (moments[:, 1] > moments[:, 0]).all()
    alive = np.ones(len(moments), dtype=bool)
    kept = []
    for index in range(len(moments)):
        if not alive[index]:
            continue
        kept.append(index)
        if len(kept) == top_k:
            break
        later = np.arange(index + 1, len(moments))
        overlap = np.maximum(0.0, np.minimum(moments[index, 1], moments[later, 1])
                             - np.maximum(moments[index, 0], moments[later, 0]))
        length = moments[index, 1] - moments[index, 0]
        others = moments[later, 1] - moments[later, 0]
        alive[later[overlap / (length + others - overlap) > thresh]] = False
    return moments[kept].tolist()


def evaluate(segments, gt_times_list, tious=(0.5, 0.7), recalls=(1, 5)):
    """eval.py's evaluate: {"ranks": [len(tious), len(recalls)] share of queries
    with an IoU > t (strict) among the first r segments, "mIoU": mean IoU of the
    top-1 segment (eval.py averages the last 3 of a sorted 1-element row)}.
    An empty segment list crashes, as in the reference."""
    hits = np.zeros((len(tious), len(recalls), len(segments)), dtype=bool)
    top1 = []
    for q, (seg, gt) in enumerate(zip(segments, gt_times_list)):
        overlap = pairwise_iou(seg, [gt])  # [P, 1]
        top1.append(np.mean(np.sort(overlap[0])[-3:]))
        for i, t in enumerate(tious):
            for j, r in enumerate(recalls):
                hits[i, j, q] = (overlap > t)[:r].any()
    return {"ranks": hits.mean(axis=-1), "mIoU": np.mean(top1)}
