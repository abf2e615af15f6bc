"""Ego4D NLQ: its annotation format, its clip features cut from per-video ones, its figures in
tan-test, and its generated stand-in trained and tested through the stock tools."""
import json
import os

import h5py
import numpy as np
import pytest
import torch

from tan.data.formats import load_annotations
from tan.engine.inference import reported_metrics
from tan.evaluation.long_video_metrics import nlq_metrics
from tan.errors import TanError
from tan_apps.converters.ego4d_nlq import SLOWFAST_RATE, cut_nlq_clips
from tan_apps.nlq_standin import make_nlq_standin

from conftest import REPO, SMALL_2DTAN, SMALL_MMN, STANDIN_RUN as RUN, run_main

NLQ_2DTAN = os.path.join(REPO, "configs", "2dtan_ego4d_nlq.yaml")
NLQ_MMN = os.path.join(REPO, "configs", "mmn_ego4d_nlq.yaml")


def _query(query, start, end, **extra):
    return dict({"query": query, "clip_start_sec": start, "clip_end_sec": end, "template": "Objects: Where is X?"},
                **extra)


def nlq_file(path, labeled=True):
    """Two videos, three clips, the release's quirks: a window of no length, a query without a sentence,
    a window past its clip's end, a clip without its uid."""
    def q(text, start, end):
        return _query(text, start, end) if labeled else {"query": text, "template": "Objects: Where is X?"}

    data = {"version": "v1", "videos": [
        {"video_uid": "video-a", "clips": [
            {"clip_uid": "clip-1", "video_start_sec": 100.0, "video_end_sec": 580.0, "annotations": [
                {"annotation_uid": "ann-1", "language_queries": [
                    q("where is the knife?", 10.5, 20.0),
                    q("what did I put in the bowl?", 30.0, 30.0),  # no length
                    {"template": "x", **({"clip_start_sec": 1.0, "clip_end_sec": 2.0} if labeled else {})},
                    q("how many cups did I wash?", 470.0, 490.0)]},  # past the clip's end
                {"annotation_uid": "ann-2", "language_queries": [q("where did I put the keys?", 0.0, 4.25)]}]},
            {"video_start_sec": 600.0, "video_end_sec": 1080.0, "annotations": [  # no clip_uid
                {"annotation_uid": "ann-3", "language_queries": [q("a", 1.0, 2.0), q("b", 3.0, 4.0)]}]}]},
        {"video_uid": "video-b", "clips": [
            {"clip_uid": "clip-2", "video_start_sec": 0.0, "video_end_sec": 300.3, "annotations": [
                {"annotation_uid": "ann-4", "language_queries": [q("who did I talk to in the shop?", 5.0, 9.0)]}]}]}]}
    path.write_text(json.dumps(data))
    return str(path)


def test_the_nlq_format_reads_queries_in_their_clips_and_counts_what_it_leaves_out(tmp_path):
    queries, counts = load_annotations(nlq_file(tmp_path / "nlq_val.json"), "ego4d_nlq")
    assert [(q.video, q.qid, q.start, q.end, q.sentence) for q in queries] == [
        ("clip-1", "ann-1_0", 10.5, 20.0, "where is the knife?"),
        ("clip-1", "ann-1_3", 470.0, 480.0, "how many cups did I wash?"),  # clipped to the clip
        ("clip-1", "ann-2_0", 0.0, 4.25, "where did I put the keys?"),
        ("clip-2", "ann-4_0", 5.0, 9.0, "who did I talk to in the shop?")]
    assert [q.duration for q in queries] == [480.0, 480.0, 480.0, 300.3]  # the clip's, not its float residue
    assert dict(counts) == {"query window of no length": 1, "query without text": 1,
                            "moment clipped to the video": 1, "clip without clip_uid": 2}
    assert all(q.labeled for q in queries)

    unannotated, _ = load_annotations(nlq_file(tmp_path / "nlq_test_unannotated.json", labeled=False), "ego4d_nlq")
    assert len(unannotated) == 5 and not any(q.labeled for q in unannotated)  # no window: none is of no length
    assert (unannotated[0].start, unannotated[0].end) == (0.0, 480.0)

    (tmp_path / "bad.json").write_text(json.dumps({"clips": []}))
    with pytest.raises(TanError, match=r"bad.json.*expected Ego4D NLQ's layout, an object with a \"videos\" list"):
        load_annotations(str(tmp_path / "bad.json"), "ego4d_nlq")


def test_clip_features_are_the_rows_of_their_video_the_baseline_cuts(tmp_path):
    annotations = nlq_file(tmp_path / "nlq_train.json")
    data = json.load(open(annotations))
    del data["videos"][0]["clips"][1]  # the clip without a uid
    with open(annotations, "w") as f:
        json.dump(data, f)
    folder = tmp_path / "slowfast"
    folder.mkdir()
    videos = {"video-a": np.random.default_rng(0).normal(size=(1200, 8)).astype(np.float32),
              "video-b": np.random.default_rng(1).normal(size=(600, 8)).astype(np.float32)}
    for uid, rows in videos.items():
        torch.save(torch.from_numpy(rows), folder / f"{uid}.pt")
    out = str(tmp_path / "clips.hdf5")
    assert cut_nlq_clips([annotations], str(folder), out) == {"clips": 2, "videos": 2, "rows": 900 + 563}
    with h5py.File(out) as h5:
        assert np.array_equal(h5["clip-1"][()], videos["video-a"][int(100 * SLOWFAST_RATE):int(580 * SLOWFAST_RATE)])
        assert np.array_equal(h5["clip-2"][()], videos["video-b"][0:int(300.3 * SLOWFAST_RATE)])

    # a folder of .npy files reads the same
    npy = tmp_path / "npy"
    npy.mkdir()
    for uid, rows in videos.items():
        np.save(npy / f"{uid}.npy", rows)
    cut_nlq_clips([annotations], str(npy), str(tmp_path / "from_npy.hdf5"))
    with h5py.File(out) as a, h5py.File(tmp_path / "from_npy.hdf5") as b:
        assert all(np.array_equal(a[k][()], b[k][()]) for k in a)

    torch.save(torch.zeros(10, 8), folder / "video-b.pt")  # too short for its clip
    with pytest.raises(TanError, match=r"clip 'clip-2': video 'video-b' has 10 rows; the clip needs rows \[0, 563\)"):
        cut_nlq_clips([annotations], str(folder), str(tmp_path / "short.hdf5"))
    assert not os.path.exists(tmp_path / "short.hdf5")


@pytest.fixture(scope="module")
def nlq_root(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("nlq"))
    make_nlq_standin(root, dim=32, seed=0, clips_per_split={"train": 12, "val": 3})
    return root


def test_the_stand_in_is_in_the_release_layout_with_its_quirks(nlq_root):
    summary = json.load(open(os.path.join(nlq_root, "ego4d_nlq_standin.json")))
    assert summary["clips"] == 15 and summary["queries"] < 15 * 9  # a few have no sentence
    queries, counts = load_annotations(os.path.join(nlq_root, "ego4d", "annotations", "nlq_train.json"), "ego4d_nlq")
    assert counts["query window of no length"] >= 5 and len({q.video for q in queries}) == 12
    with h5py.File(os.path.join(nlq_root, "ego4d", "features", "nlq_clips.hdf5")) as h5:
        assert {h5[q.video].shape for q in queries} == {(900, 32)}  # 480 s at 30/16 rows a second


@pytest.fixture(scope="module")
def nlq_run(nlq_root, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("nlq_run"))
    proc = run_main("train_net", "--config-file", NLQ_2DTAN, "DATASETS.ROOT", nlq_root, "OUTPUT_DIR", out, *SMALL_2DTAN,
                    *RUN, "SOLVER.MAX_EPOCH", "1", "SOLVER.TEST_PERIOD", "1", "SOLVER.CHECKPOINT_PERIOD", "1")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


def test_tan_test_reports_nlq_figures_of_its_predictions_by_windows_of_40_s(nlq_run, nlq_root):
    folder = os.path.join(nlq_run, "inference", "model_final", "ego4d_nlq_val")
    metrics = json.load(open(os.path.join(folder, "metrics.json")))
    lines = [json.loads(line) for line in open(os.path.join(folder, "predictions.jsonl"))]
    assert metrics["windows"] == {"videos": 3, "queries": len(lines), "length": 40.0, "stride": 20.0,
                                  "longer_than": 40.0}
    _, counts = load_annotations(os.path.join(nlq_root, "ego4d", "annotations", "nlq_val.json"), "ego4d_nlq")
    empty = counts["query window of no length"]
    assert empty > 0 and metrics["NLQ-queries"] == len(lines) + empty  # scored as misses, as the evaluator does
    expected = nlq_metrics([np.asarray(line["moments"][:5]) for line in lines], [line["gt"] for line in lines],
                           empty_windows=empty)
    for name in ("R@1,IoU@0.3", "R@1,IoU@0.5", "R@5,IoU@0.3", "R@5,IoU@0.5", "mIoU"):
        assert metrics[f"NLQ-{name}"] == pytest.approx(expected[name], abs=0.02)
    assert all(m[1] - m[0] <= 40.5 for line in lines for m in line["moments"])  # moments of a window
    stored = torch.load(os.path.join(nlq_run, "model_final.pth"), map_location="cpu", weights_only=False)
    assert stored["trained_span"] == {"median": 40.0, "longest": 40.0, "videos": 12}


def _official_figures(submission, annotations):
    """The NLQ evaluator's loop (evaluate_ego4d_nlq.py) as it reads the two files: each prediction's
    query looked up by (clip_uid, annotation_uid) and query_idx, IoU over the hull of the raw windows,
    hits above the threshold, mIoU of the first prediction, means over the predictions."""
    queries = {(c["clip_uid"], a["annotation_uid"]): a["language_queries"] for v in annotations["videos"]
               for c in v["clips"] for a in c["annotations"]}
    hits, first = {(t, k): [] for t in (0.3, 0.5) for k in (1, 5)}, []
    for result in submission["results"]:
        query = queries[result["clip_uid"], result["annotation_uid"]][result["query_idx"]]
        s, e = query["clip_start_sec"], query["clip_end_sec"]
        times = np.asarray(result["predicted_times"], dtype=np.float64)
        iou = (np.maximum(0, np.minimum(times[:, 1], e) - np.maximum(times[:, 0], s))
               / (np.maximum(times[:, 1], e) - np.minimum(times[:, 0], s)))
        first.append(iou[0])
        for t, k in hits:
            hits[t, k].append(bool((iou[:k] > t).any()))
    figures = {f"R@{k},IoU@{t}": 100 * np.mean(v) for (t, k), v in hits.items()}
    return dict(figures, mIoU=100 * np.mean(first), evaluated=len(first))


def test_the_submission_file_is_what_the_nlq_evaluator_reads_and_scores_as_tan_test(nlq_run, nlq_root):
    folder = os.path.join(nlq_run, "inference", "model_final", "ego4d_nlq_val")
    submission = json.load(open(os.path.join(folder, "ego4d_nlq_val_submission.json")))
    annotations = json.load(open(os.path.join(nlq_root, "ego4d", "annotations", "nlq_val.json")))
    lines = [json.loads(line) for line in open(os.path.join(folder, "predictions.jsonl"))]
    assert {k: submission[k] for k in ("version", "challenge")} == {"version": "1.0", "challenge": "ego4d_nlq_challenge"}
    assert len(submission["results"]) == len(lines)
    for result, line in zip(submission["results"], lines):
        assert result["clip_uid"] == line["video"] and len(result["predicted_times"]) == 5
        assert sum(result["predicted_times"], []) == pytest.approx(sum(line["moments"][:5], []), abs=1e-4)
    # the evaluator's figures over the submitted queries; tan's NLQ-* add the windows of no length as misses
    official, metrics = _official_figures(submission, annotations), json.load(open(os.path.join(folder, "metrics.json")))
    share = official["evaluated"] / metrics["NLQ-queries"]
    for name in ("R@1,IoU@0.3", "R@1,IoU@0.5", "R@5,IoU@0.3", "R@5,IoU@0.5", "mIoU"):
        assert metrics[f"NLQ-{name}"] == pytest.approx(official[name] * share, abs=0.02)


def test_the_unannotated_split_gets_its_submission_file(nlq_run, nlq_root, tmp_path):
    data = json.load(open(os.path.join(nlq_root, "ego4d", "annotations", "nlq_val.json")))
    for video in data["videos"]:
        for clip in video["clips"]:
            for annotation in clip["annotations"]:
                for query in annotation["language_queries"]:
                    for key in ("clip_start_sec", "clip_end_sec", "video_start_sec", "video_end_sec"):
                        query.pop(key)
    with open(os.path.join(nlq_root, "ego4d", "annotations", "nlq_test_unannotated.json"), "w") as f:
        json.dump(data, f)
    proc = run_main("test_net", "--ckpt", os.path.join(nlq_run, "model_final.pth"), "DATASETS.ROOT", nlq_root,
                    "DATASETS.TEST", '("ego4d_nlq_test_unannotated",)', "OUTPUT_DIR", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    folder = tmp_path / "inference" / "model_final" / "ego4d_nlq_test_unannotated"
    submission = json.load(open(folder / "ego4d_nlq_test_unannotated_submission.json"))
    metrics = json.load(open(folder / "metrics.json"))
    asked = sum(1 for v in data["videos"] for c in v["clips"] for a in c["annotations"] for q in a["language_queries"]
                if q.get("query"))
    assert len(submission["results"]) == metrics["num_queries"] == asked  # every query with a sentence
    assert metrics["labeled"] is False and metrics["windows"]["videos"] == 3


def test_the_nlq_configs_splits_do_not_overlap_on_the_stand_in(nlq_root):
    from tan.config import load_config
    from tan.data.build import RunData
    from tan.data.overlap import run_overlaps

    for config in (NLQ_2DTAN, NLQ_MMN):
        found = run_overlaps(RunData(load_config(config, ["DATASETS.ROOT", nlq_root, *RUN])))
        assert found and not [o.describe() for o in found if o.overlaps]


def test_nlq_figures_are_reported_on_nlq_datasets_only(nlq_root, synthetic_root):
    from tan.config import load_config
    from tan.data.build import RunData

    nlq = RunData(load_config(NLQ_2DTAN, ["DATASETS.ROOT", nlq_root, *SMALL_2DTAN, *RUN])).dataset("ego4d_nlq_val")
    assert "NLQ-R@1,IoU@0.3" in reported_metrics("auto", nlq)
    proc = run_main("train_net", "--config-file", os.path.join(REPO, "configs", "2dtan_synthetic.yaml"),
                    "DATASETS.ROOT", synthetic_root, "OUTPUT_DIR", str(os.path.join(nlq_root, "refused")), *RUN,
                    "TEST.BEST_METRIC", "NLQ-R@1,IoU@0.3")
    assert proc.returncode == 2
    assert "TEST.BEST_METRIC 'NLQ-R@1,IoU@0.3' is not reported on 'synthetic_val'" in proc.stdout + proc.stderr
    assert not os.path.exists(os.path.join(nlq_root, "refused", "model_1e.pth"))


@pytest.fixture(scope="module")
def larger_nlq_root(tmp_path_factory):
    """A stand-in of 60 training clips (about 470 queries) and 20 validation clips."""
    root = str(tmp_path_factory.mktemp("nlq_larger"))
    make_nlq_standin(root, dim=32, seed=0, clips_per_split={"train": 60, "val": 20})
    return root


@pytest.mark.slow
@pytest.mark.parametrize("config, small", [(NLQ_2DTAN, SMALL_2DTAN), (NLQ_MMN, SMALL_MMN)], ids=["2dtan", "mmn"])
def test_both_nlq_configs_train_on_the_stand_in_and_learn_its_queries(config, small, larger_nlq_root, tmp_path):
    """Each config, at a small width, trained by windows of 40 s and tested by windows on the
    stand-in's 8-minute clips: well above what the untrained model finds. MMN's batches are of
    videos (a window each): 8 of them, so that its 60 videos make more than a step an epoch."""
    nlq_root, out = larger_nlq_root, str(tmp_path / "run")
    proc = run_main("train_net", "--config-file", config, "DATASETS.ROOT", nlq_root, "OUTPUT_DIR", out, *small, *RUN,
                    "SOLVER.MAX_EPOCH", "15", "SOLVER.MILESTONES", "(12,)", "SOLVER.TEST_PERIOD", "15",
                    "SOLVER.CHECKPOINT_PERIOD", "15", *(["SOLVER.ONLY_IOU", "3", "SOLVER.BATCH_SIZE", "8"] if config == NLQ_MMN else []))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    trained = json.load(open(os.path.join(out, "inference", "model_final", "ego4d_nlq_val", "metrics.json")))
    untrained = run_main("test_net", "--config-file", config, "DATASETS.ROOT", nlq_root, "OUTPUT_DIR",
                         str(tmp_path / "untrained"), *small, *RUN)
    assert untrained.returncode == 0, untrained.stderr[-3000:]
    before = json.load(open(tmp_path / "untrained" / "inference" / "untrained" / "ego4d_nlq_val" / "metrics.json"))
    assert trained["NLQ-R@5,IoU@0.3"] >= before["NLQ-R@5,IoU@0.3"] + 5, (trained, before)  # of some 150 queries
