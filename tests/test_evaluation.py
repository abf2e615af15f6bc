import random
from fractions import Fraction

import pytest
import torch

from tan.engine.evaluation import evaluate_moments, metric_names, top_moments


def exact_iou(a, b):
    inter = max(0, min(a[1], b[1]) - max(a[0], b[0]))
    union = max(a[1], b[1]) - min(a[0], b[0])
    return Fraction(inter, union)


def direct_greedy(scores, duration, thresh, topk=5):
    """docs/metric.md §2-§3 as written, in exact arithmetic: all non-zero cells sorted by
    score (stable: ties in row-major order), full greedy NMS, first ``topk``."""
    n = scores.shape[0]
    cands = [(float(scores[i, j]), (i, j + 1)) for i in range(n) for j in range(n) if scores[i, j] > 0]
    cands.sort(key=lambda c: -c[0])
    kept = []
    for _, cell in cands:
        if all(exact_iou(cell, k) <= Fraction(str(thresh)) for k in kept):
            kept.append(cell)
    return [(s * duration / n, e * duration / n) for s, e in kept[:topk]]


def test_fast_nms_equals_direct_greedy_on_random_maps_with_ties():
    gen = torch.Generator().manual_seed(0)
    for trial in range(30):
        n = random.Random(trial).choice([4, 8, 16])
        b = 6
        scores = torch.rand(b, n, n, generator=gen)
        scores = (scores * 4).round() / 4  # few distinct values: many ties
        scores = scores.triu() * (torch.rand(b, n, n, generator=gen) > 0.3)
        durations = torch.rand(b, generator=gen) * 50 + 1
        thresh = [0.3, 0.4, 0.5, 0.7][trial % 4]
        moments, _, filled = top_moments(scores, durations, thresh)
        for q in range(b):
            expected = direct_greedy(scores[q], float(durations[q]), thresh)
            got = moments[q][filled[q]].tolist()
            assert len(got) == len(expected)
            for g, e in zip(got, expected):
                assert g == pytest.approx(e, abs=1e-4)


def test_hand_made_maps_give_hand_computed_recalls_with_nms():
    # duration 4 s, N = 4: cell (i, j) is [i, j + 1] seconds
    scores = torch.zeros(2, 4, 4)
    # query 0: best [0, 2]; second [0, 3] has IoU 2/3 with it and is suppressed at 0.5; then [3, 4]
    scores[0, 0, 1], scores[0, 0, 2], scores[0, 3, 3] = 0.9, 0.8, 0.7
    # query 1: best [2, 3], then [0, 1]
    scores[1, 2, 2], scores[1, 0, 0] = 0.9, 0.5
    moments, _, filled = top_moments(scores, torch.tensor([4.0, 4.0]), nms_thresh=0.5)
    assert moments[0][filled[0]].tolist() == [[0, 2], [3, 4]]
    assert moments[1][filled[1]].tolist() == [[2, 3], [0, 1]]
    gt = torch.tensor([[0.0, 3.0], [0.0, 1.0]])
    results = evaluate_moments(moments, filled, gt)
    # top-1 IoUs: 2/3 and 0; best of top-5: 2/3 and 1
    assert results["R@1,IoU@0.5"] == 50.0 and results["R@1,IoU@0.7"] == 0.0 and results["R@1,IoU@0.1"] == 50.0
    assert results["R@5,IoU@0.5"] == 100.0 and results["R@5,IoU@0.7"] == 50.0
    assert results["mIoU"] == pytest.approx(100 * (2 / 3) / 2)
    assert set(results) == set(metric_names())


def test_recall_uses_strictly_greater_than_the_threshold():
    moments = torch.tensor([[[0.0, 1.0]]])
    gt = torch.tensor([[0.0, 2.0]])  # IoU exactly 0.5
    results = evaluate_moments(moments, torch.tensor([[True]]), gt)
    assert results["R@1,IoU@0.5"] == 0.0 and results["R@1,IoU@0.3"] == 100.0


def test_a_query_with_no_candidate_counts_as_a_miss():
    moments, _, filled = top_moments(torch.zeros(1, 4, 4), torch.tensor([4.0]), 0.5)
    assert not filled.any()
    results = evaluate_moments(moments, filled, torch.tensor([[0.0, 1.0]]))
    assert results["R@5,IoU@0.1"] == 0.0 and results["mIoU"] == 0.0
