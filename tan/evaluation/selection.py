"""A model's candidate moments -> each query's kept moments (greedy NMS, docs/metric.md §2) and each
clip's saliency (§6.2): what every evaluator reads."""
import torch

from ..config.choices import NMS_UNITS
from ..structures.candidates import map_candidates
from ..structures.moments import temporal_iou

__all__ = ["top_moments", "top_candidates", "clip_saliency"]


def top_moments(scores, durations, nms_thresh, topk=5, mask2d=None, units="seconds"):
    """:func:`top_candidates` of start x end maps ``scores`` [B, N, N] (0 outside valid cells)
    for videos of ``durations`` [B] seconds; ``mask2d`` ([N, N] bool), when given, limits the
    search to those cells (tan.structures.candidates.map_candidates)."""
    return top_candidates(map_candidates(scores, durations, mask2d), nms_thresh, topk, units)


def top_candidates(candidates, nms_thresh, topk=5, units="seconds", return_cells=False):
    """Greedy NMS over each query's candidates (tan.structures.candidates.Candidates),
    stopped once ``topk`` are kept.

    ``units`` (TEST.NMS_UNITS) is what the IoU of two candidates is measured
    on: "seconds", the candidates' seconds in the model's arithmetic (float32
    for the reference's, where a pair exactly at the threshold in clip units
    may land one rounding step above it and be suppressed), or "clips", their
    exact clip bounds, where such a pair compares equal and is kept
    (docs/metric.md §2). Returns moments [B, topk, 2] (seconds), their scores
    [B, topk] and a [B, topk] bool of which slots are filled (fewer candidates
    than topk); with ``return_cells``, also each kept candidate's index [B, topk].

    Equal to the full greedy definition: candidates are those scoring above 0
    (or those the candidates mark valid) in order of descending score (ties:
    lower index first); a candidate is kept
    unless its IoU with an already kept one exceeds ``nms_thresh``. Each step
    keeps the best candidate still alive and drops those it suppresses, which
    is the same sequence of decisions, done for the whole batch at once.
    """
    if units not in NMS_UNITS:
        raise ValueError(f"units must be one of {NMS_UNITS}, got {units!r}")
    flat_scores, seconds, spans = candidates.scores, candidates.seconds, candidates.spans
    b = flat_scores.shape[0]
    measured = seconds if units == "seconds" else spans.expand(b, -1, -1)
    alive = flat_scores > 0 if candidates.valid is None else candidates.valid.clone()
    rows = torch.arange(b, device=flat_scores.device)
    kept_cells = torch.zeros(b, topk, dtype=torch.long, device=flat_scores.device)
    kept_scores = flat_scores.new_zeros(b, topk)
    filled = torch.zeros(b, topk, dtype=torch.bool, device=flat_scores.device)
    for k in range(topk):
        masked = torch.where(alive, flat_scores, torch.full_like(flat_scores, -1.0))
        best = masked.argmax(dim=1)  # first index among equal maxima: the candidates' tie order
        has = alive[rows, best]
        kept_cells[:, k] = best
        kept_scores[:, k] = torch.where(has, flat_scores[rows, best], kept_scores[:, k])
        filled[:, k] = has
        # the IoU in the measured moments' dtype, compared with the threshold in it, as the reference does
        suppress = temporal_iou(measured, measured[rows, best][:, None, :]) > nms_thresh  # [B, C]
        alive &= ~suppress
        alive[rows, best] = False
    kept_moments = seconds[rows[:, None], kept_cells]  # [B, topk, 2]
    if return_cells:
        return kept_moments, kept_scores, filled, kept_cells
    return kept_moments, kept_scores, filled


def clip_saliency(candidates, durations, clip_seconds):
    """What a 2D-map model can say about each clip of a video for highlight detection: the best score
    of any candidate moment that covers the clip's middle (docs/metric.md §6.2). ``candidates``
    (tan.structures.candidates.Candidates) of videos of ``durations`` [B] seconds; clips of
    ``clip_seconds`` from 0. Returns [B, K] float32, K the most clips of any video. A clip that no
    candidate covers, or past its video's end, gets the video's lowest candidate score (0 without
    any): never above a covered clip, whatever the sign of the model's scores."""
    count = int(torch.ceil(durations.max() / clip_seconds).clamp(min=1).item())
    middles = (torch.arange(count, device=durations.device, dtype=torch.float32) + 0.5) * clip_seconds  # [K]
    scores = candidates.scores.float()
    valid = scores > 0 if candidates.valid is None else candidates.valid
    floor = torch.where(valid, scores, torch.full_like(scores, float("inf"))).min(dim=1).values  # [B]
    floor = torch.where(torch.isfinite(floor), floor, torch.zeros_like(floor))
    scores = torch.where(valid, scores, torch.full_like(scores, float("-inf")))
    seconds = candidates.seconds.float()
    best = scores.new_empty(scores.shape[0], count)
    for k in range(count):  # one clip at a time: [B, C] at most, never [B, K, C]
        covers = (seconds[..., 0] <= middles[k]) & (seconds[..., 1] >= middles[k])
        best[:, k] = torch.where(covers, scores, torch.full_like(scores, float("-inf"))).max(dim=1).values
    inside = torch.isfinite(best) & (middles[None, :] < durations.float()[:, None])
    return torch.where(inside, best, floor[:, None].expand_as(best))
