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
  in a later scale, kernel-2 stride-1 layers after) fills the diagonals of a
  map of that scale, and the maps are copied into the full map at the
  scale's stride and accumulated offset;
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
        map_h_list, map_mask_list = [], []
        for scale_layers_ in self.layers:
            batch_size, hidden_size, num_scale_clips = x.shape
            num_scale_clips = num_scale_clips // layer_stride(scale_layers_[0])
            map_h = x.new_zeros(batch_size, hidden_size, num_scale_clips, num_scale_clips)
            map_mask = x.new_zeros(batch_size, 1, num_scale_clips, num_scale_clips)
            for i, layer in enumerate(scale_layers_):
                x = layer(x)
                s_idxs = list(range(0, num_scale_clips - i))
                e_idxs = [s + i for s in s_idxs]
                map_h[:, :, s_idxs, e_idxs] = x
                map_mask[:, :, s_idxs, e_idxs] = 1
            map_h_list.append(map_h)
            map_mask_list.append(map_mask)
        return self.recover_to_original_map(map_h_list, map_mask_list)

    def recover_to_original_map(self, h_list, mask_list):
        batch_size, hidden_size, ori_num_clips, _ = h_list[0].shape
        ori_map_h = h_list[0].new_zeros(batch_size, hidden_size, ori_num_clips, ori_num_clips)
        ori_map_mask = mask_list[0].new_zeros(batch_size, 1, ori_num_clips, ori_num_clips)
        acum_layers, stride = 0, 1
        for scale_layers_, h in zip(self.layers, h_list):
            num_scale_clips = h.shape[-1]
            for i, layer in enumerate(scale_layers_):
                stride = stride * layer_stride(layer)
                s_idxs = list(range(0, num_scale_clips - i))
                e_idxs = [s + i for s in s_idxs]
                ori_s_idxs = list(range(0, ori_num_clips - acum_layers - i * stride, stride))
                ori_e_idxs = [s + acum_layers + i * stride for s in ori_s_idxs]
                ori_map_h[:, :, ori_s_idxs, ori_e_idxs] = h[:, :, s_idxs, e_idxs]
                ori_map_mask[:, :, ori_s_idxs, ori_e_idxs] = 1
            acum_layers += stride * (len(scale_layers_) + 1)
        return ori_map_h, ori_map_mask


class BaseFusion(nn.Module):
    def __init__(self, hidden_size, txt_input_size, txt_hidden_size, num_layers, bidirectional):
        super().__init__()
        self.textual_encoder = nn.LSTM(txt_input_size, txt_hidden_size // 2 if bidirectional else txt_hidden_size,
                                       num_layers=num_layers, bidirectional=bidirectional, batch_first=True)
        self.tex_linear = nn.Linear(txt_hidden_size, hidden_size)
        self.vis_conv = nn.Conv2d(hidden_size, hidden_size, 1, 1)

    def forward(self, textual_input, textual_mask, map_h, map_mask):
        txt_h = self.textual_encoder(textual_input)[0] * textual_mask
        txt_h = torch.stack([txt_h[i][torch.sum(mask).long() - 1] for i, mask in enumerate(textual_mask)])
        txt_h = self.tex_linear(txt_h)[:, :, None, None]
        map_h = self.vis_conv(map_h)
        return F.normalize(txt_h * map_h) * map_mask


def get_padded_mask_and_weight(mask, conv):
    masked_weight = torch.round(F.conv2d(mask.clone().float(), torch.ones(1, 1, *conv.kernel_size),
                                         stride=conv.stride, padding=conv.padding, dilation=conv.dilation))
    masked_weight[masked_weight > 0] = 1 / masked_weight[masked_weight > 0]
    return masked_weight > 0, masked_weight


class MapConv(nn.Module):
    def __init__(self, input_size, hidden_sizes, kernel_sizes, strides, paddings, dilations):
        super().__init__()
        channel_sizes = [input_size] + list(hidden_sizes)
        self.convs = nn.ModuleList(nn.Conv2d(channel_sizes[i], channel_sizes[i + 1], k, s, p, d)
                                   for i, (k, s, p, d) in enumerate(zip(kernel_sizes, strides, paddings, dilations)))

    def forward(self, x, mask):
        padded_mask = mask
        for pred in self.convs:
            x = F.relu(pred(x))
            padded_mask, masked_weight = get_padded_mask_and_weight(padded_mask, pred)
            x = x * masked_weight.to(x.dtype)
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
        vis_h = self.frame_layer(visual_input.transpose(1, 2))
        map_h, map_mask = self.prop_layer(vis_h)
        fused_h = self.fusion_layer(textual_input, textual_mask, map_h, map_mask)
        fused_h = self.map_layer(fused_h, map_mask)
        prediction = self.pred_layer(fused_h) * map_mask
        return prediction, map_mask


def bce_rescale_loss(scores, masks, targets, min_iou, max_iou, bias):
    joint_prob = torch.sigmoid(scores) * masks
    target_prob = (targets - min_iou) * (1 - bias) / (max_iou - min_iou)
    target_prob[target_prob > 0] += bias
    target_prob[target_prob > 1] = 1
    target_prob[target_prob < 0] = 0
    loss = F.binary_cross_entropy(joint_prob, target_prob, reduction='none') * masks
    return torch.sum(loss) / torch.sum(masks), joint_prob


# ---------------------------------------------------------------- data

def normalize_and_average(features, num_sample_clips, normalize=True):
    """Its get_video_features (F.normalize when DATASET.NORMALIZE) then average_to_fixed_length."""
    visual_input = F.normalize(features, dim=1) if normalize else features
    num_clips = visual_input.shape[0]
    idxs = torch.arange(0, num_sample_clips + 1, 1.0) / num_sample_clips * num_clips
    idxs = torch.min(torch.round(idxs).long(), torch.tensor(num_clips - 1))
    new_visual_input = []
    for i in range(num_sample_clips):
        s_idx, e_idx = idxs[i].item(), idxs[i + 1].item()
        if s_idx < e_idx:
            new_visual_input.append(torch.mean(visual_input[s_idx:e_idx], dim=0))
        else:
            new_visual_input.append(visual_input[s_idx])
    return torch.stack(new_visual_input, dim=0)


def iou(pred, gt):
    """Its core/eval.py iou: lists of [start, end] (or one), numpy float64."""
    pred_is_list, gt_is_list = isinstance(pred[0], list), isinstance(gt[0], list)
    if not pred_is_list:
        pred = [pred]
    if not gt_is_list:
        gt = [gt]
    pred, gt = np.array(pred), np.array(gt)
    inter_left = np.maximum(pred[:, 0, None], gt[None, :, 0])
    inter_right = np.minimum(pred[:, 1, None], gt[None, :, 1])
    inter = np.maximum(0.0, inter_right - inter_left)
    union_left = np.minimum(pred[:, 0, None], gt[None, :, 0])
    union_right = np.maximum(pred[:, 1, None], gt[None, :, 1])
    union = np.maximum(0.0, union_right - union_left)
    overlap = 1.0 * inter / union
    if not gt_is_list:
        overlap = overlap[:, 0]
    if not pred_is_list:
        overlap = overlap[0]
    return overlap


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
    """Its test.py: per map, every cell i <= j in numpy's reversed argsort order, as float32
    ``[i, j + 1] / target_size * duration``."""
    out_sorted_times = []
    for score, duration in zip(scores, durations):
        T = score.shape[-1]
        sorted_indexs = np.dstack(np.unravel_index(np.argsort(score.cpu().detach().numpy().ravel())[::-1],
                                                   (T, T))).tolist()
        sorted_indexs = np.array([item for item in sorted_indexs[0] if item[0] <= item[1]]).astype(float)
        sorted_indexs[:, 1] = sorted_indexs[:, 1] + 1
        sorted_indexs = torch.from_numpy(sorted_indexs)
        out_sorted_times.append((sorted_indexs.float() / target_size * duration).tolist())
    return out_sorted_times


def nms(dets, thresh=0.4, top_k=-1):
    if len(dets) == 0:
        return []
    order = np.arange(0, len(dets), 1)
    dets = np.array(dets)
    x1, x2 = dets[:, 0], dets[:, 1]
    lengths = x2 - x1
    keep = []
    while order.size > 0:
        i = order[0]
        keep.append(i)
        if len(keep) == top_k:
            break
        xx1 = np.maximum(x1[i], x1[order[1:]])
        xx2 = np.minimum(x2[i], x2[order[1:]])
        inter = np.maximum(0.0, xx2 - xx1)
        ovr = inter / (lengths[i] + lengths[order[1:]] - inter)
        inds = np.where(ovr <= thresh)[0]
        order = order[inds + 1]
    return dets[keep]


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
