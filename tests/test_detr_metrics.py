"""Moment-DETR's metrics (tan.evaluation.detr_metrics) and its evaluator on cases worked out by hand."""
import numpy as np
import torch
import pytest

from tan.evaluation.detr_metrics import DETR_METRIC_NAMES, HIGHLIGHT_METRIC_NAMES

from tan.evaluation.detr_metrics import (MAP_THRESHOLDS, average_precision, clip_labels, clip_saliency_ap,
                                       detr_metrics, first_window_iou, highlight_metrics)


def test_r1_counts_iou_equal_to_the_threshold_and_takes_the_first_listed_window():
    gt = [[0.0, 10.0]]
    # [0, 5] has IoU 0.5 exactly: a hit at 0.5 (standalone_eval's >=), a miss at 0.7
    results = detr_metrics([([[0.0, 5.0]], [0.9])], [gt])
    assert results["MR-full-R1@0.5"] == 100.0 and results["MR-full-R1@0.7"] == 0.0
    # the first listed window counts, even with the lower score
    assert first_window_iou(np.array([[0.0, 1.0], [0.0, 10.0]]), np.array(gt)) == pytest.approx(0.1)


def test_r1_is_measured_against_the_window_the_prediction_overlaps_most():
    assert first_window_iou(np.array([[10.0, 20.0]]), np.array([[0.0, 10.0], [12.0, 20.0]])) == pytest.approx(0.8)
    assert first_window_iou(np.zeros((0, 2)), np.array([[0.0, 1.0]])) == 0.0


def test_ap_of_a_miss_then_a_hit_is_one_half():
    # ranked: miss (precision 0), hit (precision 1/2, recall 1) -> AP = 1 * 1/2
    ap = average_precision([[20.0, 30.0], [0.0, 10.0]], [0.9, 0.8], np.array([[0.0, 10.0]]))
    assert ap == pytest.approx(np.full(len(MAP_THRESHOLDS), 0.5))


def test_equal_scores_keep_their_listed_order():
    gt = np.array([[0.0, 10.0]])
    assert average_precision([[20.0, 30.0], [0.0, 10.0]], [0.5, 0.5], gt)[0] == pytest.approx(0.5)
    assert average_precision([[0.0, 10.0], [20.0, 30.0]], [0.5, 0.5], gt)[0] == pytest.approx(1.0)


def test_a_window_matched_twice_counts_once():
    # the second copy finds its window taken: a false positive after recall 1, AP stays 1
    ap = average_precision([[0.0, 10.0], [0.0, 10.0]], [0.9, 0.8], np.array([[0.0, 10.0]]))
    assert ap == pytest.approx(np.ones(len(MAP_THRESHOLDS)))


def test_ap_with_several_ground_truth_windows():
    # hit, miss, hit: precision 1, 1/2, 2/3 at recall 1/2, 1/2, 1
    # interpolated: 1 up to recall 1/2, 2/3 up to 1 -> AP = 1/2 * 1 + 1/2 * 2/3 = 5/6
    gt = np.array([[0.0, 10.0], [20.0, 30.0]])
    ap = average_precision([[0.0, 10.0], [40.0, 50.0], [20.0, 30.0]], [0.9, 0.8, 0.7], gt)
    assert ap[0] == pytest.approx(5 / 6)


def test_only_the_first_ten_listed_windows_are_ranked():
    gt = np.array([[0.0, 10.0]])
    misses = [[20.0 + i, 21.0 + i] for i in range(10)]
    # the hit is eleventh in the list although it has the best score: it is dropped before ranking
    assert average_precision(misses + [[0.0, 10.0]], [0.1] * 10 + [0.9], gt)[0] == 0.0
    assert average_precision([[0.0, 10.0]] + misses, [0.9] + [0.1] * 10, gt)[0] == 1.0


def test_map_average_over_thresholds():
    # IoU 0.6: a hit at 0.5, 0.55, 0.6 (three of ten thresholds), a miss above
    results = detr_metrics([([[0.0, 6.0]], [1.0])], [[[0.0, 10.0]]])
    assert results["MR-full-mAP@0.5"] == 100.0 and results["MR-full-mAP@0.75"] == 0.0
    assert results["MR-full-mAP"] == 30.0
    assert results["MR-buckets"]["full"]["mAP"]["0.6"] == 100.0
    assert results["MR-buckets"]["full"]["mAP"]["0.65"] == 0.0


def test_a_query_without_predictions_misses_r1_and_is_left_out_of_map():
    results = detr_metrics([([[0.0, 10.0]], [0.9]), (np.zeros((0, 2)), [])], [[[0.0, 10.0]], [[5.0, 8.0]]])
    assert results["MR-full-R1@0.5"] == 50.0
    assert results["MR-full-mAP"] == 100.0


def test_length_buckets_keep_the_windows_of_their_length():
    predictions = [([[0.0, 5.0]], [1.0]), ([[0.0, 20.0]], [1.0]), ([[50.0, 55.0], [0.0, 40.0]], [0.9, 0.8])]
    gt = [[[0.0, 5.0]], [[0.0, 20.0]], [[0.0, 40.0], [50.0, 55.0]]]
    results = detr_metrics(predictions, gt)
    buckets = results["MR-buckets"]
    assert {name: b["queries"] for name, b in buckets.items()} == {"full": 3, "short": 2, "middle": 1, "long": 1}
    # short and middle: each found first; long: [0, 40] is found second, after a miss -> AP 1/2
    assert results["MR-short-mAP"] == results["MR-middle-mAP"] == 100.0 and results["MR-long-mAP"] == 50.0
    # the third query's first window is [50, 55]: a hit in the short bucket, a miss in the long one
    assert buckets["long"]["R1"]["0.5"] == 0.0 and buckets["short"]["R1"]["0.5"] == 100.0
    assert list(results)[:-1] == list(DETR_METRIC_NAMES)


def test_a_bucket_without_queries_is_left_out():
    results = detr_metrics([([[0.0, 5.0]], [1.0])], [[[0.0, 5.0]]])
    assert "MR-long-mAP" not in results and "long" not in results["MR-buckets"]


def test_clip_saliency_ap_by_hand():
    # scores descending: pos, neg, pos, neg -> precision 1, 1/2, 2/3, 1/2 at recall 1/2, 1/2, 1, 1
    # recall levels 1/2 and 1, best precision there 1 and 2/3 -> mean 5/6
    assert clip_saliency_ap([1, 0, 1, 0], [0.9, 0.8, 0.7, 0.1]) == pytest.approx(5 / 6)
    # equal scores enter together: one level, precision 1/2
    assert clip_saliency_ap([1, 0], [0.5, 0.5]) == pytest.approx(0.5)
    # a level reached with several positives at once counts once: (1 + 3/4) / 2, not the recall-weighted mean
    assert clip_saliency_ap([1, 1, 1, 0], [0.9, 0.5, 0.5, 0.5]) == pytest.approx((1 + 3 / 4) / 2)
    assert clip_saliency_ap([1, 1], [0.1, 0.2]) == 1.0 and clip_saliency_ap([0, 0], [0.1, 0.2]) == 0.0


def test_clip_labels_lay_the_scores_on_two_second_clips():
    labels = clip_labels(9.0, [1, 3, 7], [[4, 1, 0], [2, 2, 2], [4, 4, 4]])  # 4 clips; id 7 is past the end
    assert labels.tolist() == [[0, 0, 0], [4, 1, 0], [0, 0, 0], [2, 2, 2]]


def test_highlight_metrics_by_hand():
    labels = [clip_labels(8.0, [0, 2], [[4, 2, 1], [3, 3, 3]])]  # clips 0..3
    results = highlight_metrics([[0.2, 0.1, 0.9, 0.0]], labels)
    # the top clip is 2, scored 3 by everyone: a hit at Fair and Good, a miss at VeryGood
    assert list(results) == list(HIGHLIGHT_METRIC_NAMES)
    assert results["HL-min-Fair-Hit1"] == 100.0 and results["HL-min-Good-Hit1"] == 100.0
    assert results["HL-min-VeryGood-Hit1"] == 0.0
    # Fair (>= 2): annotators 1, 2 see clips 0 and 2 positive (ranked 2nd and 1st: AP 1); annotator 3 clip 2 only (AP 1)
    assert results["HL-min-Fair-mAP"] == 100.0
    # VeryGood (4): only annotator 1's clip 0, ranked 2nd: AP 1/2; the other two have no positive clip: AP 0
    assert results["HL-min-VeryGood-mAP"] == pytest.approx(100 * (0.5 + 0 + 0) / 3, abs=0.01)
    # a prediction longer than the video is cut before ranking; its top clip past the end is no hit
    longer = highlight_metrics([[0.1, 0.2, 0.3, 0.0, 5.0]], labels)
    assert longer["HL-min-Fair-Hit1"] == 0.0
    assert longer["HL-min-Fair-mAP"] == pytest.approx(100.0 * np.mean([clip_saliency_ap([1, 0, 1, 0], [0.1, 0.2, 0.3, 0.0])] * 2 + [1.0]), abs=0.01)


def test_clip_saliency_is_the_best_covering_candidate():
    from tan.evaluation import clip_saliency
    from tan.structures.candidates import Candidates

    seconds = torch.tensor([[[0.0, 2.0], [0.0, 4.0], [4.0, 6.0]]] * 2)
    spans = torch.zeros(3, 2)
    # video 0 (6 s, clips 0-2, 2-4, 4-6): [4, 6] scores 0, so it is no candidate; clip 2 gets the lowest score
    # video 1 (4 s): its third clip is past the end
    scores = torch.tensor([[0.9, 0.5, 0.0], [0.2, 0.7, 0.4]])
    got = clip_saliency(Candidates(scores, seconds, spans), torch.tensor([6.0, 4.0]), 2.0)
    np.testing.assert_allclose(got.numpy(), [[0.9, 0.5, 0.5], [0.7, 0.7, 0.2]], rtol=1e-6)
    # scores of any sign (valid given): an uncovered clip never ranks above a covered one
    negative = torch.tensor([[-0.1, -0.5, -0.9]])
    got = clip_saliency(Candidates(negative, seconds[:1], spans, torch.ones(1, 3, dtype=torch.bool)),
                        torch.tensor([8.0]), 2.0)
    np.testing.assert_allclose(got.numpy(), [[-0.1, -0.5, -0.9, -0.9]], rtol=1e-6)


def test_submission_file_names():
    from tan.evaluation.moment_detr import submission_name

    assert submission_name("qvhighlight_lighthouse_val") == "hl_val_submission.jsonl"
    assert submission_name("qvhighlight_lighthouse_test") == "hl_test_submission.jsonl"
    assert submission_name("qvhighlights_test") == "hl_test_submission.jsonl"
    assert submission_name("charades_lighthouse_test") == "charades_lighthouse_test_submission.jsonl"


def _evaluate_untrained(root, out, *extra):
    from conftest import SYNTHETIC_CONFIG, run_main

    return run_main("test_net", "--config-file", SYNTHETIC_CONFIG, "DATASETS.ROOT", root, "OUTPUT_DIR", str(out),
                    "DATASETS.TEST", "('synthetic_val',)", "MODEL.DEVICE", "cpu", "DATALOADER.NUM_WORKERS", "0", *extra)


@pytest.mark.slow
def test_the_config_turns_the_metrics_on_and_they_match_the_predictions_file(synthetic_root, tmp_path):
    import json

    folder = tmp_path / "on" / "inference" / "untrained" / "synthetic_val"
    proc = _evaluate_untrained(synthetic_root, tmp_path / "on", "TEST.DETR_METRICS", "on")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    metrics = json.loads((folder / "metrics.json").read_text())
    assert set(DETR_METRIC_NAMES) - {"MR-long-mAP"} <= set(metrics) and "MR-buckets" in metrics
    lines = [json.loads(line) for line in (folder / "predictions.jsonl").read_text().split("\n") if line]
    assert max(len(line["moments"]) for line in lines) == 10  # the top 10 are kept for the mAP
    again = detr_metrics([(np.array(line["moments"]), np.array(line["scores"])) for line in lines],
                         [np.array([line["gt"]]) for line in lines])
    for name in DETR_METRIC_NAMES:
        if name in metrics:
            assert again[name] == pytest.approx(metrics[name], abs=0.02), name
    assert (folder / "synthetic_val_submission.jsonl").is_file()

    # "auto" (the default): the synthetic annotations are not JSON lines, so neither the metrics nor the file
    proc = _evaluate_untrained(synthetic_root, tmp_path / "auto")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    folder = tmp_path / "auto" / "inference" / "untrained" / "synthetic_val"
    assert not [k for k in json.loads((folder / "metrics.json").read_text()) if k.startswith("MR-")]
    assert not (folder / "synthetic_val_submission.jsonl").exists()


@pytest.mark.slow
def test_a_best_metric_the_validation_data_does_not_report_is_refused_before_the_run_folder_claims_a_run(
        synthetic_root, tmp_path):
    from conftest import SYNTHETIC_CONFIG, run_main

    out = tmp_path / "run"
    proc = run_main("train_net", "--config-file", SYNTHETIC_CONFIG, "DATASETS.ROOT", synthetic_root, "OUTPUT_DIR",
                    str(out), "MODEL.DEVICE", "cpu", "TEST.BEST_METRIC", "MR-full-mAP", "DATALOADER.NUM_WORKERS", "0")
    assert proc.returncode == 2
    assert "TEST.BEST_METRIC 'MR-full-mAP' is not reported on 'synthetic_val'" in proc.stdout + proc.stderr
    assert not (out / "config.yml").exists()


class _FakeDataset:
    """The fields of a MomentDataset that the metrics read."""

    def __init__(self, **fields):
        self.__dict__.update(fields)

    def __len__(self):
        return len(self.gt_moments)


def _fake_dataset(windows, saliency=None, durations=None):
    counts = np.array([len(w) for w in windows])
    padded = np.stack([np.concatenate([w, np.repeat(w[:1], counts.max() - len(w), axis=0)]) for w in
                       (np.asarray(w, dtype=np.float32) for w in windows)])
    return _FakeDataset(name="fake", gt_moments=padded, moment_counts=counts, labeled=True, annotation_format="jsonl",
                           saliency=saliency, durations=np.asarray(durations or [8.0] * len(windows), dtype=np.float32))


def test_the_metrics_reported_leave_out_length_buckets_without_queries():
    from tan.engine.inference import reported_metrics

    names = reported_metrics("auto", _fake_dataset([[[0.0, 5.0]], [[1.0, 4.0]]]))  # short windows only
    assert "MR-short-mAP" in names and "MR-long-mAP" not in names and "MR-middle-mAP" not in names
    assert not [n for n in names if n.startswith("HL-")]  # no saliency labels
    assert not [n for n in reported_metrics("off", _fake_dataset([[[0.0, 5.0]]])) if n.startswith("MR-")]


def test_highlights_are_scored_over_the_queries_that_have_labels():
    from tan.evaluation import Prediction
    from tan.evaluation.moment_detr import MomentDetrEvaluator

    labels = ((0, 2), ((4, 2, 1), (3, 3, 3)))
    dataset = _fake_dataset([[[0.0, 2.0]], [[4.0, 6.0]]], saliency=[labels, None])
    predictions = {i: Prediction(torch.tensor([[0.0, 2.0]]), torch.tensor([True]), torch.tensor([0.9]),
                                 torch.tensor([0.2, 0.1, 0.9, 0.0])) for i in range(2)}
    evaluator = MomentDetrEvaluator(dataset, "fake")
    evaluator.reset()
    evaluator.process(predictions)
    results = evaluator.evaluate()
    alone = highlight_metrics([[0.2, 0.1, 0.9, 0.0]], [clip_labels(8.0, *labels)])
    assert {k: results[k] for k in HIGHLIGHT_METRIC_NAMES} == alone  # the query without labels is left out


def test_the_comparison_shows_moment_detrs_metrics_where_every_row_has_them():
    from tan.evaluation.comparison import comparison_rows

    ours = {m: 1.0 for m in ("R@1,IoU@0.1", "R@1,IoU@0.3", "R@1,IoU@0.5", "R@1,IoU@0.7", "R@5,IoU@0.1",
                              "R@5,IoU@0.3", "R@5,IoU@0.5", "R@5,IoU@0.7", "mIoU")}
    rows = comparison_rows({"a": {"qvh_val": dict(ours, **{"MR-full-mAP": 30.0}), "qvh_test": {}},
                            "b": {"qvh_val": dict(ours, **{"MR-full-mAP": 31.0})}}, {})
    assert [r["name"] for r in rows] == ["a", "b"]  # the split without labels has no row
    assert [r["MR-full-mAP"] for r in rows] == [30.0, 31.0]
    mixed = comparison_rows({"a": {"x": dict(ours, **{"MR-full-mAP": 30.0})}, "b": {"y": ours}}, {})
    assert all("MR-full-mAP" not in r for r in mixed)
