import random
from fractions import Fraction

import numpy as np
import pytest
import torch

from tan.evaluation import evaluate_moments, metric_names, top_moments


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


def test_fast_nms_in_clip_units_equals_direct_greedy_on_random_maps_with_ties():
    gen = torch.Generator().manual_seed(0)
    for trial in range(30):
        n = random.Random(trial).choice([4, 8, 16])
        b = 6
        scores = torch.rand(b, n, n, generator=gen)
        scores = (scores * 4).round() / 4  # few distinct values: many ties
        scores = scores.triu() * (torch.rand(b, n, n, generator=gen) > 0.3)
        durations = torch.rand(b, generator=gen) * 50 + 1
        thresh = [0.3, 0.4, 0.5, 0.7][trial % 4]
        moments, _, filled = top_moments(scores, durations, thresh, units="clips")
        for q in range(b):
            expected = direct_greedy(scores[q], float(durations[q]), thresh)
            got = moments[q][filled[q]].tolist()
            assert len(got) == len(expected)
            for g, e in zip(got, expected):
                assert g == pytest.approx(e, abs=1e-4)


@pytest.mark.parametrize("units", ["seconds", "clips"])
def test_hand_made_maps_give_hand_computed_recalls_with_nms(units):
    # duration 4 s, N = 4: cell (i, j) is [i, j + 1] seconds, exactly; no IoU at the threshold: both rules agree
    scores = torch.zeros(2, 4, 4)
    # query 0: best [0, 2]; second [0, 3] has IoU 2/3 with it and is suppressed at 0.5; then [3, 4]
    scores[0, 0, 1], scores[0, 0, 2], scores[0, 3, 3] = 0.9, 0.8, 0.7
    # query 1: best [2, 3], then [0, 1]
    scores[1, 2, 2], scores[1, 0, 0] = 0.9, 0.5
    moments, _, filled = top_moments(scores, torch.tensor([4.0, 4.0]), nms_thresh=0.5, units=units)
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


# --- TEST.NMS_UNITS: pairs exactly at the threshold in clip units ---------------------------------------------------

def seconds_f32(bounds, duration, n):
    """Clip bounds -> seconds the reference's way, in numpy float32: (bound * d) / N, each step rounded."""
    f = np.float32
    return [[float(f(f(b) * f(duration)) / f(n)) for b in span] for span in bounds]


def f32_iou(a, b):
    """The reference's IoU of two [start, end] float32 moments, in float32."""
    f = np.float32
    a, b = [f(x) for x in a], [f(x) for x in b]
    inter, union = min(a[1], b[1]) - max(a[0], b[0]), max(a[1], b[1]) - min(a[0], b[0])
    return max(inter, f(0)) / union


def one_map(n, cells):
    scores = torch.zeros(1, n, n)
    for (i, j), score in cells:
        scores[0, i, j] = score
    return scores


def kept(scores, duration, thresh, units):
    moments, _, filled = top_moments(scores, torch.tensor([duration]), thresh, units=units)
    return moments[0][filled[0]].tolist()


def test_at_0_4_in_clip_units_seconds_round_one_pair_above_and_one_below_the_threshold():
    # N = 15, threshold 0.4. The best, [0, 15) clips, meets two candidates at IoU exactly 6/15 = 0.4:
    # [3, 9) (score 0.8) and [0, 6) (score 0.7).
    n, thresh = 15, 0.4
    scores = one_map(n, [((0, 14), 0.9), ((3, 8), 0.8), ((0, 5), 0.7)])
    # clip units: 6/15 is the float32 nearest 0.4, equal to the threshold: neither is suppressed
    # ([3, 9) against [0, 6) is 3/9, below too)
    for duration in (13.0, 30.0):
        assert kept(scores, duration, thresh, "clips") == seconds_f32([(0, 15), (3, 9), (0, 6)], duration, n)
    # seconds, d = 13: 15 * 13 / 15 = 13 exactly, but [3, 9) becomes [2.5999999, 7.8000002]; the overlap
    # 5.2000003 over 13 is 0.40000004 > 0.4 (float32): suppressed. [0, 6) becomes [0, 5.1999998];
    # 5.1999998 / 13 = 0.39999998: kept.
    a, b, c = seconds_f32([(0, 15), (3, 9), (0, 6)], 13.0, n)
    assert a == [0.0, 13.0] and f32_iou(a, b) > np.float32(0.4) and f32_iou(a, c) < np.float32(0.4)
    assert kept(scores, 13.0, thresh, "seconds") == [a, c]
    # seconds, d = 30: every bound is an exact even number of seconds, IoU 12/30 is the float32 0.4: both kept
    assert kept(scores, 30.0, thresh, "seconds") == [[0.0, 30.0], [6.0, 18.0], [0.0, 12.0]]


def test_at_0_5_in_clip_units_the_fifth_kept_moment_depends_on_the_rule():
    # N = 10, threshold 0.5: B = [1, 3) against the best A = [0, 4) has IoU 2/4 = 0.5 exactly.
    n, thresh = 10, 0.5
    scores = one_map(n, [
        ((0, 3), 0.9),  # A [0, 4)
        ((1, 2), 0.8),  # B [1, 3): IoU 0.5 with A
        ((5, 9), 0.7),  # C [5, 10): disjoint from A and B
        ((6, 8), 0.6),  # D [6, 9): IoU 3/5 with C, suppressed by both rules
        ((0, 0), 0.5),  # E [0, 1): IoU 1/4 with A, touches B
        ((7, 7), 0.4),  # F [7, 8): IoU 1/5 with C
        ((4, 4), 0.3),  # G [4, 5): touches A, C
    ])
    a, b, c, e, f, g = ([0, 4], [1, 3], [5, 10], [0, 1], [7, 8], [4, 5])
    for duration in (23.7, 17.3):
        assert kept(scores, duration, thresh, "clips") == seconds_f32([a, b, c, e, f], duration, n)
    # d = 23.7: A is [0, 9.4800005], B [2.3700001, 7.1100006]; overlap 4.7400007 over 9.4800005 is
    # 0.50000006 > 0.5: B is suppressed, and G moves up to fifth place
    sa, sb = seconds_f32([a, b], 23.7, n)
    assert f32_iou(sa, sb) > np.float32(0.5)
    assert kept(scores, 23.7, thresh, "seconds") == seconds_f32([a, c, e, f, g], 23.7, n)
    # d = 17.3: A is [0, 6.9199996], B [1.7299999, 5.1899996]; 3.4599996 / 6.9199996 = 0.49999997: B is kept
    sa, sb = seconds_f32([a, b], 17.3, n)
    assert f32_iou(sa, sb) < np.float32(0.5)
    assert kept(scores, 17.3, thresh, "seconds") == seconds_f32([a, b, c, e, f], 17.3, n)


def reference_greedy(scores, duration, thresh):
    """The reference evaluation's NMS for one query, written out in numpy float32: every non-zero
    cell, its seconds (bound * d) / N, sorted by descending score (ties: row-major, a stable sort),
    each one not yet suppressed suppresses the later ones whose IoU with it is above the float32
    threshold. Returns all kept (seconds) and their scores, best first."""
    f = np.float32
    n = scores.shape[0]
    rows, cols = np.nonzero(scores)  # row-major
    values = scores[rows, cols]
    bounds = np.stack([rows, cols + 1], axis=1).astype(np.float32)
    seconds = (bounds * f(duration)) / f(n)
    order = sorted(range(len(values)), key=lambda c: -values[c])
    seconds, values = seconds[order], values[order]
    suppressed = np.zeros(len(order), dtype=bool)
    for c in range(len(order)):
        if suppressed[c]:
            continue
        rest = seconds[c + 1:]
        inter = np.minimum(rest[:, 1], seconds[c, 1]) - np.maximum(rest[:, 0], seconds[c, 0])
        union = np.maximum(rest[:, 1], seconds[c, 1]) - np.minimum(rest[:, 0], seconds[c, 0])
        suppressed[c + 1:] |= np.maximum(inter, f(0)) / union > f(thresh)
    return seconds[~suppressed], values[~suppressed]


def test_nms_in_seconds_equals_the_reference_algorithm_per_query_on_random_maps_and_durations():
    gen = torch.Generator().manual_seed(2)
    rng = random.Random(2)
    differs = 0
    for trial in range(40):
        n = rng.choice([10, 15, 16, 32])
        b = 8
        scores = torch.rand(b, n, n, generator=gen)
        scores = (scores * 8).round() / 8  # ties between scores too
        scores = scores.triu() * (torch.rand(b, n, n, generator=gen) > 0.2)
        durations = (torch.rand(b, generator=gen) * 120 + 0.5).float()
        thresh = [0.3, 0.4, 0.45, 0.5, 0.6, 0.7][trial % 6]
        topk = 5 if trial % 2 else 8
        moments, kept_scores, filled = top_moments(scores, durations, thresh, topk=topk, units="seconds")
        clips, _, filled_clips = top_moments(scores, durations, thresh, topk=topk, units="clips")
        for q in range(b):
            expected, expected_scores = reference_greedy(scores[q].numpy(), float(durations[q]), thresh)
            count = min(topk, len(expected))
            assert filled[q].tolist() == [True] * count + [False] * (topk - count)
            assert np.array_equal(moments[q][:count].numpy(), expected[:count])  # bit for bit
            assert np.array_equal(kept_scores[q][:count].numpy(), expected_scores[:count])
            differs += not torch.equal(clips[q][filled_clips[q]], moments[q][filled[q]])
    assert differs > 0  # the maps did hit pairs at the threshold that rounding decides


def test_top_moments_rejects_unknown_units():
    with pytest.raises(ValueError, match="units"):
        top_moments(torch.zeros(1, 4, 4), torch.tensor([4.0]), 0.5, units="frames")
