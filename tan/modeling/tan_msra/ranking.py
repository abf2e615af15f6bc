"""The reference's proposals as tan's candidates (docs/tan_msra.md §4).

Its test loop (get_proposal_results) sorts each query's whole T x T score map
with numpy's argsort, reverses it (descending), keeps the cells with i <= j,
masked ones included (they score 0 and come last), and turns cell (i, j)
into the moment [i, j + 1] / T * duration in float32 on the GPU, where a
division by a Python number is a multiplication by its float32 reciprocal.
Its NMS then works on those moments in numpy float64.

:func:`ranked_candidates` lays the candidates out in that order, so that
tan's NMS (tan.evaluation.top_candidates: the highest score first,
ties to the lower index) walks them as the reference's loop does; the
moments are the reference's float32 seconds, widened to float64 so that the
IoU of two of them is measured in float64 as its NMS measures it (exact
subtractions of float32 values; the same quotient whichever way the union
is written). Every one of them is marked valid, so that tan's NMS also walks
the masked cells, which score 0 and come last, as the reference ranks them.
"""
import numpy as np
import torch

from ...structures.candidates import Candidates


def reference_order(scores):
    """[B, C] int64: per query, the cells (i * N + j, i <= j) of ``scores`` [B, N, N] in the
    order of numpy's argsort of the flattened map, reversed (one call per map, as the reference)."""
    flat = scores.detach().float().cpu().numpy().reshape(scores.shape[0], -1)
    n = scores.shape[-1]
    rows = []
    for values in flat:
        order = np.argsort(values)[::-1]
        rows.append(order[order // n <= order % n])
    return torch.from_numpy(np.stack(rows).astype(np.int64))


def reference_seconds(spans, durations, num_clips):
    """float32 ``spans`` [..., 2] (clip units) of videos ``durations`` [B] as the reference's GPU
    computes ``spans / num_clips * duration``: times the float32 reciprocal, then times the
    float32 duration."""
    reciprocal = torch.tensor(1.0, dtype=torch.float32) / torch.tensor(float(num_clips), dtype=torch.float32)
    return (spans * reciprocal.to(spans.device)) * durations.to(spans.device).float()[:, None, None]


def ranked_candidates(scores, durations):
    """Candidates of ``scores`` [B, N, N] (0 outside the valid cells) in the reference's order."""
    b, n, _ = scores.shape
    cells = reference_order(scores).to(scores.device)  # [B, C]
    spans = torch.stack([cells // n, cells % n + 1], dim=-1).float()  # [B, C, 2]
    ranked = scores.reshape(b, n * n).float().gather(1, cells)
    every = torch.ones_like(ranked, dtype=torch.bool)  # masked cells (score 0) are candidates too, last
    return Candidates(ranked, reference_seconds(spans, durations, n).double(), spans, every)
