"""Where MS-2D-TAN's cells are in time: the per-scale maps joined into one
start x duration map, the candidates the evaluation ranks, and the training
targets (docs/ms2dtan.md §6). The arithmetic of the times is the
reference's: float32 products, IoU in float64.

Scale s has cells of d = 2**s clips: its cell (r, a) starts at clip r * d and
lasts (a + 1) * d clips. On the joined [N, N] map (N clips) that is cell
(r * d, (a + 1) * d - 1): row = start clip, column = duration in clips - 1.
"""
import torch

from ...structures.candidates import Candidates, ScoreMap


def joined_map(per_scale, fill=None):
    """Per-scale [B, N_s, A_s] -> [B, N, N] start x duration, the max where scales
    share a moment, 0 (or ``fill``) where none has one."""
    b, n = per_scale[0].shape[0], per_scale[0].shape[1]
    out = per_scale[0].new_zeros(b, n, n)
    for scale, values in enumerate(per_scale):
        d = 2 ** scale
        rows, anchors = values.shape[1:]
        view = out[:, :rows * d:d, d - 1:anchors * d:d]
        view.copy_(torch.maximum(view, values))
    return out


def cell_clips(n, device):
    """[N, N, 2] float32 (start, end) in clips of every cell of the joined map."""
    grid = torch.arange(n, device=device, dtype=torch.float32)
    starts = grid[:, None].expand(n, n)
    return torch.stack([starts, starts + grid[None, :] + 1], dim=-1)


def window_seconds(n, time_unit, device):
    """[N, N, 2] seconds of the cells for clips of ``time_unit`` seconds, float32 as the
    reference: start = row * unit, end = start + (column + 1) * unit."""
    grid = torch.arange(n, device=device, dtype=torch.float32)
    unit = torch.tensor(time_unit, dtype=torch.float32, device=device)
    starts = (grid * unit)[:, None].expand(n, n)
    return torch.stack([starts, starts + ((grid + 1) * unit)[None, :]], dim=-1)


def duration_seconds(n, durations):
    """[B, N, N, 2] seconds of the cells of N clips over videos of ``durations`` [B] s, float32:
    start = row / N * duration, end = start + (column + 1) / N * duration."""
    grid = torch.arange(n, device=durations.device, dtype=torch.float32)
    d = durations.float()[:, None]
    starts = (grid / n)[None, :] * d  # [B, N]
    lengths = ((grid + 1) / n)[None, :] * d
    starts = starts[:, :, None].expand(-1, n, n)
    return torch.stack([starts, starts + lengths[:, None, :]], dim=-1)


def joined_candidates(scores, valid, seconds):
    """Candidates of joined maps: ``scores`` [B, N, N] (0 where invalid), ``seconds`` [N, N, 2] or
    [B, N, N, 2]; only the cells some scale covers (``valid`` [N, N], any row of the batch)."""
    b, n, _ = scores.shape
    cells = valid.flatten().nonzero().flatten()  # row-major: ties to the earlier start, then shorter
    seconds = seconds.reshape(-1, n * n, 2)[:, cells].expand(b, -1, -1).double()  # NMS in float64, as numpy
    spans = cell_clips(n, scores.device).reshape(n * n, 2)[cells]
    return Candidates(scores.reshape(b, n * n)[:, cells].float(), seconds, spans)


def joined_picture(scores, valid, seconds):
    """The ScoreMap of joined maps (start x duration, as the model has them)."""
    seconds = seconds if seconds.dim() == 4 else seconds[None].expand(scores.shape[0], -1, -1, -1)
    return ScoreMap(scores, valid, seconds[..., 0], seconds[..., 1], row_label="start clip i",
                    col_label="duration (clips) - 1")


def iou_targets(moments, span_seconds, rows, anchors, num_rows):
    """Each cell's IoU with the moment, as the reference's training targets: ``moments`` [B, 2]
    seconds (float64), the map of query b covering ``span_seconds`` [B] over ``rows`` [B] rows
    (cells of span / rows seconds), padded with zero rows to ``num_rows``. Times are float32,
    the IoU float64; cells ending past the map are zeroed except on row 0 (its quirk; the
    mask hides them all)."""
    device = moments.device
    r = torch.arange(num_rows, device=device, dtype=torch.float32)[None, :, None]
    a = torch.arange(1, anchors + 1, device=device, dtype=torch.float32)[None, None, :]
    span = span_seconds.float()[:, None, None]
    count = rows.float()[:, None, None]
    starts = (r * span) / count
    ends = starts + (a * span) / count
    gt = moments.float().double()
    s64, e64 = starts.double(), ends.double()
    inter = (torch.minimum(e64, gt[:, 1, None, None]) - torch.maximum(s64, gt[:, 0, None, None])).clamp(min=0)
    union = (torch.maximum(e64, gt[:, 1, None, None]) - torch.minimum(s64, gt[:, 0, None, None])).clamp(min=0)
    iou = inter / union
    row = torch.arange(num_rows, device=device)[None, :, None]
    col = torch.arange(anchors, device=device)[None, None, :]
    past_end = (row + col >= rows[:, None, None]) & (row >= 1)
    return torch.where(past_end | (row >= rows[:, None, None]), torch.zeros_like(iou), iou)


def rescaled(iou, min_iou, max_iou, bias):
    """The loss's targets: IoU rescaled from [min_iou, max_iou] to [0, 1], ``bias`` added
    to the positive ones, capped to [0, 1]."""
    target = (iou - min_iou) * (1 - bias) / (max_iou - min_iou)
    return torch.where(target > 0, target + bias, target).clamp(0, 1)
