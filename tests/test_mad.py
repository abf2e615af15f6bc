"""MAD: its annotation format, its figures in tan-test from each query's top 100 moments over
windows of hour-long movies, and its generated stand-in trained and tested through the stock tools."""
import json
import os

import h5py
import numpy as np
import pytest
import torch

from tan.data.formats import load_annotations
from tan.data.formats.mad import STALE_MOMENT
from tan.engine.inference import reported_metrics
from tan.evaluation.long_video_metrics import mad_metrics
from tan.errors import TanError
from tan_apps.mad_standin import ROWS_PER_SECOND, make_mad_standin

from conftest import REPO, SMALL_2DTAN, SMALL_MMN, STANDIN_RUN as RUN, run_main

MAD_2DTAN = os.path.join(REPO, "configs", "2dtan_mad.yaml")
MAD_MMN = os.path.join(REPO, "configs", "mmn_mad.yaml")
MAD_NAMES = [f"R@{k},IoU@{t}" for k in (1, 5, 10, 50, 100) for t in (0.1, 0.3, 0.5, 0.7)]


def mad_file(path):
    """The release's layout with the cases the reader must handle."""
    def q(movie, sentence, ext, plain=None, duration=3600.0, **extra):
        record = {"movie": movie, "sentence": sentence, "movie_duration": duration}
        if ext is not None:
            record["ext_timestamps"] = ext
        if plain is not None:
            record["timestamps"] = plain
        return dict(record, **extra)

    data = {
        "10": q("tt001", "He sits down.", [8.0, 8.0]),  # no length, and no query before it: left out, a miss
        "11": q("tt001", "Someone opens the door.", [10.25, 14.5], [10.5, 14.0]),  # ext_timestamps read
        "12": q("tt001", "She looks at the photo.", None, [100.0, 103.0]),  # timestamps where ext is missing
        "13": q("tt001", "He drops the glass.", [200.0, 200.0], [199.5, 200.5]),  # no length: 12's moment
        "14": q("tt001", "The man runs past.", [3598.0, 3603.0]),  # clipped to the movie
        "15": q("tt001", "", [5.0, 6.0]),  # no sentence
        "16": q("tt002", "The crowd watches the car.", [3.0, 7.0], duration=5400.0),
        "17": q("tt002", "Someone lights the candle.", [5500.0, 5510.0], duration=5400.0),  # past the end
        "18": {"sentence": "x", "ext_timestamps": [1.0, 2.0], "movie_duration": 10.0},  # no movie
        "19": q("tt002", "The waiter fills the glass.", ["1", 2.0], duration=5400.0),  # a string is not a number
        # no length, after 17's moment (past the movie's end): a miss as MAD scores it, left out
        "20": q("tt002", "The car stops.", [9.0, 8.0], duration=5400.0),
    }
    path.write_text(json.dumps(data))
    return str(path)


def test_the_mad_format_reads_each_query_in_its_movie_and_counts_what_it_leaves_out(tmp_path):
    queries, counts = load_annotations(mad_file(tmp_path / "MAD_test.json"), "mad")
    assert [(q.qid, q.video, q.duration, q.start, q.end) for q in queries] == [
        ("11", "tt001", 3600.0, 10.25, 14.5), ("12", "tt001", 3600.0, 100.0, 103.0),
        ("13", "tt001", 3600.0, 100.0, 103.0),  # MAD's loader gives it the moment of the query before it
        ("14", "tt001", 3600.0, 3598.0, 3600.0), ("16", "tt002", 5400.0, 3.0, 7.0)]
    assert queries[0].sentence == "Someone opens the door."
    assert counts == {"query window of no length": 1, "query window that ends before it starts": 1,
                      STALE_MOMENT: 1, "moment clipped to the video": 1, "query without text": 1,
                      "query window outside its movie": 1, "query without movie": 1,
                      "ext_timestamps not two numbers": 1}


def test_a_movie_has_one_duration_and_the_file_its_layout(tmp_path):
    path = tmp_path / "MAD_val.json"
    path.write_text(json.dumps({"1": {"movie": "tt1", "sentence": "a b", "ext_timestamps": [1, 2], "movie_duration": 60},
                                "2": {"movie": "tt1", "sentence": "c d", "ext_timestamps": [1, 2], "movie_duration": 90}}))
    with pytest.raises(TanError, match=r"query '2' gives movie 'tt1' a duration of 90.0 s, an earlier query 60.0 s"):
        load_annotations(str(path), "mad")
    path.write_text(json.dumps({"videos": [{"movie": "tt1"}]}))  # another benchmark's layout
    with pytest.raises(TanError, match="expected MAD's layout"):
        load_annotations(str(path), "mad")


@pytest.fixture(scope="module")
def mad_root(tmp_path_factory):
    """Hour-long movies: 2 to train on (40 queries each), 1 to validate (2 queries) and 1 to test (4,
    and a fifth whose moment has no length)."""
    root = str(tmp_path_factory.mktemp("mad"))
    make_mad_standin(root, dim=32, seed=0, movies_per_split={"train": 2, "val": 1, "test": 1},
                     queries_per_movie={"train": 40, "val": 2, "test": 4}, minutes=(60, 65))
    test_file = os.path.join(root, "mad", "annotations", "MAD_test.json")
    data = json.load(open(test_file))
    first = next(iter(data.values()))
    data["no-length"] = dict(first, ext_timestamps=[100.0, 100.0])
    with open(test_file, "w") as f:
        json.dump(data, f)
    return root


def test_the_stand_in_is_in_the_release_layout(mad_root):
    summary = json.load(open(os.path.join(mad_root, "mad_standin.json")))
    assert summary["queries"] == 86 and summary["rows_per_second"] == 5.0
    _, counts = load_annotations(os.path.join(mad_root, "mad", "annotations", "MAD_test.json"), "mad")
    assert counts == {STALE_MOMENT: 1}
    data = json.load(open(os.path.join(mad_root, "mad", "annotations", "MAD_train.json")))
    record = data["0"]
    assert set(record) == {"movie", "sentence", "timestamps", "ext_timestamps", "movie_duration"}
    assert record["ext_timestamps"][0] <= record["timestamps"][0] < record["timestamps"][1] <= record["ext_timestamps"][1]
    queries, _ = load_annotations(os.path.join(mad_root, "mad", "annotations", "MAD_train.json"), "mad")
    assert all(3600 <= q.duration <= 3900 and q.end - q.start < 31 for q in queries)
    with h5py.File(os.path.join(mad_root, "mad", "features", "CLIP_frames_features_5fps.h5")) as h5:
        assert sorted(h5) == ["test-movie-0000", "train-movie-0000", "train-movie-0001", "val-movie-0000"]
        duration = data["0"]["movie_duration"]
        assert h5[data["0"]["movie"]].shape == (round(duration * ROWS_PER_SECOND), 32)
    with h5py.File(os.path.join(mad_root, "mad", "features", "CLIP_language_tokens_features.h5")) as h5:
        assert len(h5) == summary["queries"]  # every query of every split, by its id
        assert h5["0"].shape == (len(record["sentence"].split()) + 1, 32)  # a row per word and the full stop


@pytest.fixture(scope="module")
def mad_run(mad_root, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("mad_run"))
    proc = run_main("train_net", "--config-file", MAD_2DTAN, "DATASETS.ROOT", mad_root, "OUTPUT_DIR", out, *SMALL_2DTAN,
                    *RUN, "SOLVER.BATCH_SIZE", "16", "SOLVER.MAX_EPOCH", "1", "SOLVER.TEST_PERIOD", "1",
                    "SOLVER.CHECKPOINT_PERIOD", "1")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


def test_tan_test_reports_mad_figures_of_the_top_100_moments_by_windows(mad_run, mad_root):
    folder = os.path.join(mad_run, "inference", "model_final", "mad_test")
    metrics = json.load(open(os.path.join(folder, "metrics.json")))
    lines = [json.loads(line) for line in open(os.path.join(folder, "predictions.jsonl"))]
    assert metrics["windows"] == {"videos": 1, "queries": 5, "length": 25.6, "stride": 12.8, "longer_than": 25.6,
                                  "cover_end": False, "rows_per_second": 5.0, "candidates": 0}
    # the query of no length is scored against the moment of the query before it, as MAD's evaluation does
    assert len(lines) == 5 and metrics["MAD-queries"] == 5 and lines[-1]["gt"] == lines[-2]["gt"]
    assert all(len(line["moments"]) == 100 for line in lines)  # an hour of windows has more than enough
    with h5py.File(os.path.join(mad_root, "mad", "features", "CLIP_frames_features_5fps.h5"), "r") as h5:
        rows = h5["test-movie-0000"].shape[0]
    # MAD's windows: every 64 rows from the start, none after the last that ends before the last row; a
    # moment is whole cells of 2 rows, at row / 5 s
    last_end = (((rows - 128 - 1) // 64) * 64 + 128) / 5.0
    assert all(m[1] - m[0] <= 25.6 and m[1] <= last_end for line in lines for m in line["moments"])
    assert all(abs(t * 2.5 - round(t * 2.5)) < 1e-3 for line in lines for m in line["moments"] for t in m)
    expected = mad_metrics([np.asarray(line["moments"]) for line in lines], [line["gt"] for line in lines])
    for name in MAD_NAMES:
        assert metrics[f"MAD-{name}"] == pytest.approx(expected[name], abs=0.02)
    assert metrics["R@5,IoU@0.5"] <= metrics["MAD-R@5,IoU@0.5"] + 1e-6  # above 0.5 vs at or above
    stored = torch.load(os.path.join(mad_run, "model_final.pth"), map_location="cpu", weights_only=False)
    assert stored["trained_span"] == {"median": 25.6, "longest": 25.6, "videos": 2}


def test_the_mad_configs_splits_do_not_overlap_and_report_mad_figures_only_there(mad_root, synthetic_root):
    from tan.config import load_config
    from tan.data.build import RunData
    from tan.data.overlap import run_overlaps

    for config, small in ((MAD_2DTAN, SMALL_2DTAN), (MAD_MMN, SMALL_MMN)):
        data = RunData(load_config(config, ["DATASETS.ROOT", mad_root, *small, *RUN]))
        found = run_overlaps(data)
        assert found and not [o.describe() for o in found if o.overlaps]
        assert "MAD-R@5,IoU@0.3" in reported_metrics("auto", data.dataset("mad_val"))
    proc = run_main("train_net", "--config-file", os.path.join(REPO, "configs", "2dtan_synthetic.yaml"),
                    "DATASETS.ROOT", synthetic_root, "OUTPUT_DIR", str(os.path.join(mad_root, "refused")), *RUN,
                    "TEST.BEST_METRIC", "MAD-R@5,IoU@0.3")
    assert proc.returncode == 2
    assert "TEST.BEST_METRIC 'MAD-R@5,IoU@0.3' is not reported on 'synthetic_val'" in proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def larger_mad_root(tmp_path_factory):
    """Hour-long movies: 4 to train on (100 queries each), 2 to test (10 queries each)."""
    root = str(tmp_path_factory.mktemp("mad_larger"))
    make_mad_standin(root, dim=32, seed=1, movies_per_split={"train": 4, "val": 1, "test": 2},
                     queries_per_movie={"train": 100, "val": 4, "test": 10}, minutes=(60, 65))
    return root


@pytest.mark.slow
@pytest.mark.parametrize("config, small, extra", [
    (MAD_2DTAN, SMALL_2DTAN, ["SOLVER.BATCH_SIZE", "16", "SOLVER.MAX_EPOCH", "20", "SOLVER.MILESTONES", "(15,)"]),
    (MAD_2DTAN, SMALL_2DTAN, ["SOLVER.BATCH_SIZE", "16", "SOLVER.MAX_EPOCH", "20", "SOLVER.MILESTONES", "(15,)",
                              "INPUT.SENTENCE_FEATURES", "True", "INPUT.PRE_QUERY_SIZE", "32"]),
    (MAD_MMN, SMALL_MMN, ["SOLVER.BATCH_SIZE", "16", "SOLVER.MAX_EPOCH", "20", "SOLVER.MILESTONES", "(15,)",
                          "SOLVER.ONLY_IOU", "5"])], ids=["2dtan", "2dtan_clip_tokens", "mmn"])
def test_both_mad_configs_train_on_hour_long_movies_and_learn_their_queries(config, small, extra, larger_mad_root,
                                                                             tmp_path):
    """Each config at a small width, trained by windows of 25.6 s and tested by windows over hour-long
    movies: well above what the untrained model finds among each movie's some 280 windows. 2D-TAN also
    reads the sentences as the baseline does, from the CLIP token features' file."""
    root, out = larger_mad_root, str(tmp_path / "run")
    proc = run_main("train_net", "--config-file", config, "DATASETS.ROOT", root, "OUTPUT_DIR", out, *small, *RUN,
                    *extra, "SOLVER.TEST_PERIOD", "0", "SOLVER.CHECKPOINT_PERIOD", "1000")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    trained = json.load(open(os.path.join(out, "inference", "model_final", "mad_test", "metrics.json")))
    tokens = ["INPUT.SENTENCE_FEATURES", "True", "INPUT.PRE_QUERY_SIZE", "32"] if "INPUT.SENTENCE_FEATURES" in extra else []
    untrained = run_main("test_net", "--config-file", config, "DATASETS.ROOT", root, "OUTPUT_DIR",
                         str(tmp_path / "untrained"), *small, *RUN, *tokens)
    assert untrained.returncode == 0, untrained.stderr[-3000:]
    before = json.load(open(tmp_path / "untrained" / "inference" / "untrained" / "mad_test" / "metrics.json"))
    # of 20 queries; the mean of R@100 at IoU 0.3, 0.5 and 0.7 (on an AVX-512 EPYC: 2D-TAN 60.0 trained,
    # 0.0 untrained; MMN, which has no negative windows, 18.3 against 3.3)
    def mean(figures):
        return sum(figures[f"MAD-R@100,IoU@{t}"] for t in (0.3, 0.5, 0.7)) / 3

    assert mean(trained) >= mean(before) + (30 if config == MAD_2DTAN else 8), (trained, before)


def test_features_that_do_not_last_their_video_at_mad_s_rate_are_refused_naming_the_key(mad_run, tmp_path):
    """On the rows' clock (TEST.WINDOW.ROWS_PER_SECOND 5) a video's moments are placed by its rows: 600 rows
    of a 600 s video would be grounded as 120 s. Refused in one line, naming the video, both spans and the key."""
    features = tmp_path / "v.npy"
    np.save(features, np.random.default_rng(0).normal(size=(600, 32)).astype(np.float32))
    proc = run_main("predict", "--ckpt", os.path.join(mad_run, "model_final.pth"), "--features", str(features),
                    "--duration", "600", "--query", "Someone opens the door.")
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    [line] = [l for l in (proc.stdout + proc.stderr).splitlines() if " ERROR: " in l or l.startswith("error: ")]
    assert line.endswith("the video: 600 feature rows at TEST.WINDOW.ROWS_PER_SECOND 5 last 120.0 s, but its "
                         "duration is 600.0 s; set TEST.WINDOW.ROWS_PER_SECOND to its features' rate (about 1), or "
                         "0 to lay its rows over its duration")
    np.save(features, np.random.default_rng(0).normal(size=(3000, 32)).astype(np.float32))  # 5 a second: grounded
    proc = run_main("predict", "--ckpt", os.path.join(mad_run, "model_final.pth"), "--features", str(features),
                    "--duration", "600", "--query", "Someone opens the door.", "--topk", "3")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_mad_s_own_evaluation_on_the_model_s_scores_gives_tan_test_s_figures_and_moments(mad_run, mad_root,
                                                                                       monkeypatch, tmp_path):
    """The scores tan-test computes for every window of every test movie, evaluated as MAD's code evaluates
    them (tests/oracles/reference_mad.py: its windows, its cells at its seconds, one NMS over the movie,
    its moment for a query of no length): every MAD-* figure of tan-test, and each query's 100 moments."""
    from oracles import reference_mad as mad
    from tan.modeling.tan2d.model import TAN

    calls = []  # what the model scored, in order: ("maps", windows) per encoded batch, ("scores", [P, C])
    encode, candidates = TAN.encode_video, TAN.candidates

    def recorded_encode(self, feats):
        calls.append(("maps", feats.shape[0]))
        return encode(self, feats)

    def recorded_candidates(self, output, durations):
        found = candidates(self, output, durations)
        calls.append(("scores", found.scores.detach().clone()))
        return found
    monkeypatch.setattr(TAN, "encode_video", recorded_encode)
    monkeypatch.setattr(TAN, "candidates", recorded_candidates)
    out = tmp_path / "test"
    proc = run_main("test_net", "--ckpt", os.path.join(mad_run, "model_final.pth"), "DATASETS.ROOT", mad_root,
                    "OUTPUT_DIR", str(out), "TEST.WINDOW.BATCH", "3")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    monkeypatch.undo()
    folder = out / "inference" / "model_final" / "mad_test"
    metrics = json.load(open(folder / "metrics.json"))
    lines = [json.loads(line) for line in open(folder / "predictions.jsonl")]
    records = json.load(open(os.path.join(mad_root, "mad", "annotations", "MAD_test.json")))
    with h5py.File(os.path.join(mad_root, "mad", "features", "CLIP_frames_features_5fps.h5"), "r") as h5:
        rows = h5["test-movie-0000"].shape[0]
    windows = len(mad.window_starts(rows))
    # the one movie's sentences, each scored in every window: batches of windows, in each every sentence
    # against every window of the batch, sentences first
    per_sentence = [[] for _ in lines]
    scored = iter(torch.cat([c[1] for c in calls if c[0] == "scores"]))
    for batch in [c[1] for c in calls if c[0] == "maps"]:
        for s in range(len(lines)):
            per_sentence[s].extend(next(scored) for _ in range(batch))
    assert next(scored, None) is None and all(len(p) == windows for p in per_sentence)
    from tan.modeling import build_model
    from tan.config.setup import load_config_text
    stored = torch.load(os.path.join(mad_run, "model_final.pth"), map_location="cpu", weights_only=False)
    mask2d = build_model(load_config_text(stored["config"], "the checkpoint")).mask2d
    cells = mad.cell_moments(mask2d, windows)
    truth = mad.ground_truth(records)
    assert [line["sentence"] for line in lines] == [r["sentence"] for r in records.values()]
    ranked = [mad.ranked(cells, torch.cat(p)) for p in per_sentence]
    assert np.asarray([line["gt"] for line in lines]) == pytest.approx(np.stack([truth[q] for q in records]), abs=1e-3)
    figures = mad.recall(ranked, [truth[q] for q in records])
    assert {name: metrics[f"MAD-{name}"] for name in figures} == figures
    for line, moments in zip(lines, ranked):
        assert np.asarray(line["moments"]) == pytest.approx(moments.numpy(), abs=1e-4)
