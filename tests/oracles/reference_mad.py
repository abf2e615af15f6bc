"""MAD's evaluation (Soldelli/MAD, baselines/VLG-Net) computed the way its code computes it, one query
at a time, for the test that tan-test's MAD figures are MAD's own. Nothing here is used by training
or testing.

- the ground truth (lib/data/datasets/mad.py, ``_compute_annotaions``): in the file's order, a query
  whose ``ext_timestamps`` start before they end gets [max(start, 0), min(end, duration)] in float32;
  any other keeps the moment of the last query that had one (the loop's variable), whatever its movie;
- the windows (``_compute_windows_per_movie``): 128 rows from every 64th row below rows - 128;
- the candidates (lib/engine/inference.py, evaluation.py ``_eval``): every valid cell (i, j) of a
  window as cells [i, j + 1) of the window's 64, plus 32 a window, over 2.5 cells a second, float32;
- the NMS (``nms``): by descending score (here a stable sort: MAD's orders equal scores in no defined
  way), a candidate is suppressed by a kept one whose IoU, the intersection over the hull in float32,
  is above the threshold; the first 100 kept;
- a hit (``_eval``): IoU at or above the threshold among the first k, a list shorter than 100 padded
  with IoU 0; the recall is the mean over every query, percent to two decimals of the float32.
"""
import torch

WINDOW_ROWS, STRIDE_ROWS, NUM_CLIPS, ROWS_PER_SECOND = 128, 64, 64, 5
RELATIVE_FPS = ROWS_PER_SECOND * NUM_CLIPS / WINDOW_ROWS  # cells a second: 2.5
STRIDE_CELLS = round(STRIDE_ROWS * NUM_CLIPS / WINDOW_ROWS)  # 32


def ground_truth(records):
    """{query id: its moment (float32 [2])} of a MAD annotation file's records ({qid: record}), in order."""
    moments, moment = {}, None
    for qid, record in records.items():
        start, end = record["ext_timestamps"]
        if start < end:
            moment = torch.tensor([max(start, 0), min(end, record["movie_duration"])])
        moments[qid] = moment
    return moments


def window_starts(num_rows):
    """The first row of every window of a movie of ``num_rows`` feature rows."""
    return torch.arange(0, num_rows - WINDOW_ROWS, STRIDE_ROWS)


def cell_moments(mask2d, num_windows):
    """[num_windows x C, 2] the candidates in cells of the movie: each window's valid cells, row-major."""
    cells = torch.nonzero(mask2d.float(), as_tuple=False)
    cells[:, 1] += 1
    return torch.cat([cells + w * STRIDE_CELLS for w in range(num_windows)])


def iou(candidates, moment):
    start, end = candidates[:, 0].float(), candidates[:, 1].float()
    inter = end.min(moment[1]) - start.max(moment[0])
    return inter.clamp(min=0) / (end.max(moment[1]) - start.min(moment[0]))


def ranked(cells, scores, thresh=0.3, topk=100):
    """The NMS: the first ``topk`` moments kept, in seconds (float32), best first."""
    scores, order = scores.sort(descending=True, stable=True)
    moments = cells[order] / RELATIVE_FPS
    suppressed = torch.zeros(len(moments), dtype=torch.bool)
    kept = []
    for i in range(len(moments)):
        if suppressed[i]:
            continue
        kept.append(i)
        if len(kept) == topk:
            break
        suppressed[i + 1:] |= iou(moments[i + 1:], moments[i]) > thresh
    return moments[kept]


def recall(ranked_moments, moments, recall_at=(1, 5, 10, 50, 100), thresholds=(0.1, 0.3, 0.5)):
    """{"R@k,IoU@t": percent} over every query: ``ranked_moments`` and ``moments`` per query."""
    hits = torch.zeros(len(recall_at), len(thresholds))
    for predicted, moment in zip(ranked_moments, moments):
        ious = torch.nn.functional.pad(iou(predicted, moment), (0, recall_at[-1] - len(predicted)), value=0.0)
        found = ious[:, None] >= torch.tensor(thresholds)
        for r, k in enumerate(recall_at):
            hits[r] += found[:k].any(dim=0)
    hits /= len(moments)
    return {f"R@{k},IoU@{t}": float(f"{hits[r, c] * 100:.02f}") for r, k in enumerate(recall_at)
            for c, t in enumerate(thresholds)}
