"""Ego4D NLQ's and MAD's metrics (tan/evaluation/long_video_metrics.py) on cases worked by hand with their
official evaluators' arithmetic: several predicted windows, empty query windows, IoUs exactly at a
threshold, fewer predictions than k."""
import math

import numpy as np
import pytest

from tan.evaluation.long_video_metrics import mad_iou, mad_metrics, nlq_iou, nlq_metrics


def test_nlq_iou_is_the_intersection_over_the_hull():
    assert nlq_iou([[12, 22], [0, 5], [20, 30]], (10, 20)).tolist() == pytest.approx([8 / 12, 0.0, 0.0])
    assert nlq_iou([[6, 8]], (7, 7)).tolist() == [0.0]  # an empty query window overlaps nothing
    assert math.isnan(nlq_iou([[7, 7]], (7, 7))[0])  # 0 / 0, as numpy divides


def test_nlq_recalls_and_miou_by_hand():
    predictions = [
        [[12, 22], [0, 5]],  # IoU 8/12 first: a hit at 0.3 and 0.5 from R@1
        [[40, 50], [32, 42], [0, 1]],  # 0 first, 8/12 second: a hit at R@5 only
        [[0, 5]],  # IoU exactly 0.5: above 0.3, not above 0.5
        [[6, 8], [5, 9]],  # an empty window: IoU 0 whatever is predicted
    ]
    windows = [(10, 20), (30, 40), (0, 10), (7, 7)]
    result = nlq_metrics(predictions, windows, num_queries=6)
    assert result == {"R@1,IoU@0.3": 50.0, "R@1,IoU@0.5": 25.0, "R@5,IoU@0.3": 75.0, "R@5,IoU@0.5": 50.0,
                      "mIoU": round(100 * (8 / 12 + 0 + 0.5 + 0) / 4, 2), "evaluated": 4, "queries": 6}
    # the mean is over the queries predicted: leaving the empty one out raises every figure
    assert nlq_metrics(predictions[:3], windows[:3])["R@1,IoU@0.3"] == 66.67


def test_nlq_only_the_first_k_count_and_a_query_needs_a_prediction():
    ranked = [[[0, 1]] * 5 + [[10, 20]]]  # the right window sixth: beyond R@5
    assert nlq_metrics(ranked, [(10, 20)])["R@5,IoU@0.5"] == 0.0
    with pytest.raises(ValueError, match="query 0 has no predicted window"):
        nlq_metrics([[]], [(0, 1)])
    assert math.isnan(nlq_metrics([[[7, 7]]], [(7, 7)])["mIoU"])  # the evaluator's 0 / 0 carried through


def test_mad_iou_is_float32_and_clamped():
    iou = mad_iou([[0, 3], [20, 30]], (0, 10))
    assert iou.dtype == np.float32 and iou.tolist() == [np.float32(0.3), 0.0]


def test_mad_recalls_by_hand():
    far = [[500.0, 505.0]]
    predictions = [
        [[100, 110]] + far * 3,  # right first
        far * 4 + [[50, 55]],  # IoU 0.5 fifth: a hit at 0.1-0.5 from R@5, none at 0.7
        far * 60 + [[0, 10]],  # right 61st: only R@100
        [],  # nothing predicted: every slot IoU 0
    ]
    windows = [(100, 110), (50, 60), (0, 10), (0, 10)]
    result = mad_metrics(predictions, windows)
    expected = {}
    for k in (1, 5, 10, 50, 100):
        for t in (0.1, 0.3, 0.5, 0.7):
            hits = 1 + (k >= 5 and t <= 0.5) + (k >= 100)
            expected[f"R@{k},IoU@{t}"] = 100 * hits / 4
    assert result == {**expected, "evaluated": 4}
    # a fifth query, whose window has no length, is a miss everywhere
    with_miss = mad_metrics(predictions, windows, misses=1)
    assert with_miss.pop("evaluated") == 5
    assert with_miss == pytest.approx({k: v * 4 / 5 for k, v in expected.items()}, abs=1e-9)


def test_mad_counts_an_iou_at_the_threshold_where_nlq_does_not():
    # 3 s of a 10 s window: IoU 0.3 in either precision
    assert mad_metrics([[[0, 3]]], [(0, 10)])["R@1,IoU@0.3"] == 100.0
    assert nlq_metrics([[[0, 3]]], [(0, 10)])["R@1,IoU@0.3"] == 0.0


def test_nlq_counts_queries_whose_window_has_no_length_as_misses():
    """Two queries found at rank 1 (IoU 1.0 and 0.4), and two more whose windows have no length:
    the evaluator gives them IoU 0 for every prediction of positive length."""
    figures = nlq_metrics([np.array([[0.0, 10.0]]), np.array([[0.0, 4.0]])], [(0.0, 10.0), (0.0, 10.0)],
                          empty_windows=2)
    assert figures["R@1,IoU@0.3"] == 50.0 and figures["R@1,IoU@0.5"] == 25.0
    assert figures["mIoU"] == 35.0 and figures["evaluated"] == 4
