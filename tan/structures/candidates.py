"""A model's candidate moments, in the form the evaluation and the prediction
tools read: whatever a model's map looks like (start x end, start x duration,
several scales), it lays its candidates out as :class:`Candidates`, and draws
its map as a :class:`ScoreMap` (docs/models.md §2).

:func:`map_candidates` and :func:`map_picture` are the layout of an N x N
start x end map (cell (i, j): clips i..j, tan.structures.moments).
"""
from typing import NamedTuple

import torch

from .moments import candidate_moments, cell_seconds, cell_spans


class Candidates(NamedTuple):
    """``scores`` [B, C]; ``seconds`` [B, C, 2] the moments as reported, in the dtype
    of the model's arithmetic (the NMS measures IoU in it); ``spans`` [C, 2] or
    [B, C, 2] the same moments' exact bounds in clip units (TEST.NMS_UNITS
    "clips"); ``valid`` [B, C] bool, which are candidates (None: those scoring
    above 0). Ties in score go to the lower index."""
    scores: torch.Tensor
    seconds: torch.Tensor
    spans: torch.Tensor
    valid: torch.Tensor = None


class ScoreMap(NamedTuple):
    """A score map as drawn: ``values`` [B, R, C] (0 outside ``valid``), ``valid`` [R, C]
    or [B, R, C] bool, ``starts`` / ``ends`` [B, R, C] each cell's moment (seconds),
    and what the rows and columns stand for."""
    values: torch.Tensor
    valid: torch.Tensor
    starts: torch.Tensor
    ends: torch.Tensor
    row_label: str = "start clip i"
    col_label: str = "end clip j"


def map_candidates(scores, durations, mask2d=None):
    """Candidates of start x end maps ``scores`` [B, N, N] for videos of ``durations`` [B]
    seconds, in row-major cell order; ``mask2d`` ([N, N] bool) limits them to those cells
    (the others score 0: the same result, for a sixth of the work at N = 128)."""
    b, n, _ = scores.shape
    device = scores.device
    if mask2d is None:
        cells = torch.arange(n * n, device=device)
    else:
        cells = mask2d.to(device).flatten().nonzero().flatten()  # ascending: row-major order kept
    spans = cell_spans(cells // n, cells % n)  # [C, 2] clip units, small integers: exact in float32
    return Candidates(scores.reshape(b, n * n)[:, cells].float(), cell_seconds(spans, durations.to(device), n), spans)


def map_picture(scores, durations, mask2d):
    """The ScoreMap of start x end maps ``scores`` [B, N, N]."""
    moments = candidate_moments(scores.shape[-1], durations.to(scores.device).float())
    return ScoreMap(scores, mask2d, moments[..., 0], moments[..., 1])
