"""The references' own experiment files, converted by tan-convert-config, train and evaluate as the
references do (the references score every video whole), and the windows of long videos lie on the
video's rows.

Each built-in model (2D-TAN in chenjoya/2dtan's form, microsoft's 2D-TAN as TAN_MSRA, MMN, MS-2D-TAN)
trains from its reference's file, converted, on the seed comparison's generated data in TACoS's layout
(tools/seed_comparison), cut so that every test video is longer than every training video: tan's
default would window them in the periodic evaluation, the references score them whole. MS-2D-TAN,
whose input keeps the features' own rate, then evaluates the same data by windows: every window
holds the training window's 64 rows, and the threshold is the longest training video."""
import json
import os
import shutil
import sys
import types

import numpy as np
import pytest
import torch
import yaml

from tan.config import load_config
from tan.engine.long_videos.windowed_evaluation import WindowedEvaluation
from tan.engine.long_videos.windows import WindowSettings, window_rows, window_settings, window_spans
from tan.utils.checkpoint_file import stored_trained_span

from conftest import ONE_THREAD, REPO, SYNTHETIC_CONFIG, run_main
from helpers.tan_msra_experiments import experiment as tan_msra_experiment

sys.path.insert(0, os.path.join(REPO, "tools", "seed_comparison"))
import make_dataset  # noqa: E402  (tools/seed_comparison, the data of the references' comparisons)
import videox_cpu  # noqa: E402

SEED_COMPARISON = os.path.join(REPO, "tools", "seed_comparison")
LONGEST_TRAINING = 62.0  # seconds: the training videos kept; the evaluated ones are longer
# one short epoch and the periodic evaluation after it, on the CPU
SHORT = ["MODEL.DEVICE", "cpu", "DATALOADER.NUM_WORKERS", "0", "SOLVER.MAX_EPOCH", "2", "SOLVER.ITERS_PER_EPOCH", "3",
         "SOLVER.TEST_PERIOD", "1", "SOLVER.CHECKPOINT_PERIOD", "1", "SOLVER.LOG_PERIOD", "1"]


def _durations(annotations):
    return {video: record["num_frames"] / record["fps"] for video, record in annotations.items()}


def _keep(path, keep):
    with open(path) as f:
        annotations = json.load(f)
    durations = _durations(annotations)
    with open(path, "w") as f:
        json.dump({v: a for v, a in annotations.items() if keep(durations[v])}, f)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """The generated data (make_dataset.py, fewer videos) with the training videos of up to
    LONGEST_TRAINING seconds and the validation and test videos longer than that."""
    root = tmp_path_factory.mktemp("reference_data")
    make_dataset.write(str(root), 7, train_videos=16, test_videos=12, test_phrasings=1)
    annotations = root / "tacos" / "annotations"
    _keep(annotations / "train.json", lambda d: d <= LONGEST_TRAINING)
    _keep(annotations / "val.json", lambda d: d > LONGEST_TRAINING)
    _keep(annotations / "test.json", lambda d: d > LONGEST_TRAINING)
    return root


def _annotations(data, split):
    return json.loads((data / "tacos" / "annotations" / f"{split}.json").read_text())


def _tan_msra_file(folder, data):
    """microsoft/2D-TAN's TACoS experiment (pool) at small widths, in its repository's layout: the
    file in experiments/tacos/, its data in data/TACoS/ and GloVe in .vector_cache/."""
    tacos = folder / "data" / "TACoS"
    (folder / "experiments" / "tacos").mkdir(parents=True)
    (folder / ".vector_cache").mkdir()
    tacos.mkdir(parents=True)
    for split in ("train", "val", "test"):
        shutil.copy(data / "tacos" / "annotations" / f"{split}.json", tacos / f"{split}.json")
    os.symlink(data / "tacos" / "features" / "tall_c3d_features.hdf5", tacos / "tall_c3d_features.hdf5")
    os.symlink(data / "glove" / "glove.840B.300d.txt", folder / ".vector_cache" / "glove.6B.300d.txt")
    file = tan_msra_experiment("tacos", "pool")
    file["WORKERS"] = 0
    file["DATASET"].update(NUM_SAMPLE_CLIPS=64, TARGET_STRIDE=2)  # 32 clips
    file["TRAIN"].update(BATCH_SIZE=16, MAX_EPOCH=2)
    tan = file["TAN"]
    tan["FRAME_MODULE"]["PARAMS"].update(INPUT_SIZE=64, HIDDEN_SIZE=16)
    tan["PROP_MODULE"]["PARAMS"]["NUM_SCALE_LAYERS"] = [16, 8]
    tan["FUSION_MODULE"]["PARAMS"].update(HIDDEN_SIZE=16, TXT_INPUT_SIZE=50, TXT_HIDDEN_SIZE=16,
                                          LSTM={"NUM_LAYERS": 1, "BIDIRECTIONAL": False})
    tan["MAP_MODULE"]["PARAMS"].update(INPUT_SIZE=16, HIDDEN_SIZES=[16, 16], KERNEL_SIZES=[5, 5], STRIDES=[1, 1],
                                       PADDINGS=[4, 0], DILATIONS=[1, 1])
    tan["PRED_INPUT_SIZE"] = 16
    path = folder / "experiments" / "tacos" / "2D-TAN-32x32-K5L2-pool.yaml"
    path.write_text(yaml.safe_dump(file, sort_keys=False))
    return path, []


def reference_file(model, data, folder):
    """(the reference's experiment file, what tan-convert-config is given beside it, overrides that
    make the converted config run here): its files as tools/seed_comparison has them."""
    if model == "TAN":
        return os.path.join(SEED_COMPARISON, "reference.yaml"), ["--data-root", str(data)], []
    if model == "MMN":  # an LSTM over the word vectors, where its file asks for DistilBERT (not installed here)
        return os.path.join(SEED_COMPARISON, "mmn_reference.yaml"), ["--data-root", str(data)], [
            "MODEL.MMN.TEXT_ENCODER.NAME", "LSTM", "MODEL.MMN.TEXT_ENCODER.LSTM.HIDDEN_SIZE", "32",
            "MODEL.MMN.TEXT_ENCODER.LSTM.NUM_LAYERS", "1", "INPUT.PRE_QUERY_SIZE", "50"]
    if model == "MS_TAN":
        return (os.path.join(SEED_COMPARISON, "ms2dtan_reference.yaml"),
                ["--data-root", videox_cpu.lay_out(str(data))], [])
    path, given = _tan_msra_file(folder, data)
    return str(path), given, []


def convert_and_train(model, data, tmp_path, *extra):
    """The reference's file converted, then trained two short epochs with the periodic evaluation
    after each; returns (the converted config, OUTPUT_DIR, the run's log)."""
    source, given, overrides = reference_file(model, data, tmp_path / "reference")
    converted = str(tmp_path / "converted.yaml")
    proc = run_main("convert_config", source, "--out", converted, *given)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = tmp_path / "out"
    proc = run_main("train_net", "--config-file", converted, "--skip-test", "OUTPUT_DIR", str(out), *SHORT,
                    *overrides, *extra, env=ONE_THREAD, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return load_config(converted), out, (out / "log.txt").read_text()


def evaluated(out, epoch=1):
    """The record (metrics.jsonl) of the periodic evaluation after ``epoch``."""
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    [record] = [r for r in records if r.get("epoch") == epoch and "dataset" in r and "iter" not in r]
    return record


@pytest.mark.slow
@pytest.mark.parametrize("model", ["TAN", "TAN_MSRA", "MMN", "MS_TAN"])
def test_a_converted_reference_file_trains_and_evaluates_every_video_whole_as_its_reference(model, data, tmp_path):
    cfg, out, log = convert_and_train(model, data, tmp_path)
    assert cfg.MODEL.ARCHITECTURE == model and cfg.TEST.WINDOW.IN_EVALUATION is False
    assert "TEST.WINDOW.IN_EVALUATION False: tan-test and the periodic evaluation score every video whole" in (
        tmp_path / "converted.yaml").read_text()
    assert ("long videos: TEST.WINDOW.IN_EVALUATION is off: the evaluation scores every video whole, as the "
            "reference evaluates") in log
    assert "grounded by windows" not in log
    record, split = evaluated(out), "val" if cfg.DATASETS.VAL else "test"
    assert record["dataset"] == (cfg.DATASETS.VAL or cfg.DATASETS.TEST)[0] and 0 <= record["R@1,IoU@0.5"] <= 100
    queries = sum(len(a["sentences"]) for a in _annotations(data, split).values())
    assert f"{record['dataset']}: {queries} queries evaluated" in log  # every one, whole
    # what tan's default would have done with the same run: every evaluated video is longer than every
    # training video, so all would have been windowed (the trained span is the run's own record)
    span = stored_trained_span(torch.load(out / "model_1e.pth", map_location="cpu", weights_only=False))
    assert span["longest"] == pytest.approx(max(_durations(_annotations(data, "train")).values()), abs=1e-3)
    windows, _ = window_settings(load_config(str(tmp_path / "converted.yaml"), ["TEST.WINDOW.IN_EVALUATION", "True"]),
                                 span, evaluation=True)
    assert all(windows.applies_to(d) for d in _durations(_annotations(data, split)).values())


@pytest.mark.slow
def test_ms2dtan_evaluates_videos_longer_than_every_training_video_in_windows_of_its_training_rows(data, tmp_path):
    """MS-2D-TAN's TACoS experiment of the seed comparison (rows of 0.5442 s, training windows of 64
    rows = 34.83 s), evaluated by windows (TEST.WINDOW.IN_EVALUATION True): its periodic evaluation
    stopped with "stack expects each tensor to be equal size, but got [64, 64] at entry 0 and [65, 64]"
    and its threshold fell to the window's length."""
    cfg, out, log = convert_and_train("MS_TAN", data, tmp_path, "TEST.WINDOW.IN_EVALUATION", "True")
    train, test = _durations(_annotations(data, "train")), _durations(_annotations(data, "test"))
    longest = max(train.values())
    assert all(d <= LONGEST_TRAINING for d in train.values()) and all(d > longest for d in test.values())
    length = 64 * cfg.MODEL.MS_TAN.TIME_UNIT  # every training video is longer than its training window
    assert min(train.values()) > length
    assert (f"long videos: windows of {length:.4g} s every {length / 2:.4g} s for videos longer than {longest:.4g} s "
            f"(length from the median of the {len(train)} training videos); {longest:.4g} s: the longest training "
            f"video, as the model took it in") in log
    queries = sum(len(a["sentences"]) for a in _annotations(data, "test").values())
    name = evaluated(out)["dataset"]
    windowed = (f"{name}: {queries} queries of {len(test)} videos longer than {longest:.4g} s grounded by windows "
                f"of {length:.4g} s every {length / 2:.4g} s")
    assert windowed in log and log.count(windowed) == 2  # after each epoch
    import h5py
    with h5py.File(data / "tacos" / "features" / "tall_c3d_features.hdf5", "r") as f:
        rows = {video: len(f[video]) for video in test}
    for video, duration in test.items():  # every window holds the training window's rows, none twice
        spans = window_spans(duration, length, length / 2, rows[video])
        held = [window_rows(rows[video], duration, *span) for span in spans]
        assert len(spans) > 1 and {last - first for first, last, _, _ in held} == {64}, (video, held)
        assert len({first for first, _, _, _ in held}) == len(held) and held[-1][1] == rows[video]

    # tan-test of the epoch's checkpoint: the span it records, the same windows, written down
    proc = run_main("test_net", "--ckpt", str(out / "model_1e.pth"), "OUTPUT_DIR", str(tmp_path / "tested"),
                    env=ONE_THREAD, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert windowed in proc.stdout + proc.stderr
    results = tmp_path / "tested" / "inference" / "model_1e" / name
    metrics = json.loads((results / "metrics.json").read_text())
    assert metrics["windows"] == {"videos": len(test), "queries": queries, "length": pytest.approx(length, abs=1e-4),
                                  "stride": pytest.approx(length / 2, abs=1e-4),
                                  "longer_than": pytest.approx(longest, abs=1e-4)}
    assert metrics["num_queries"] == queries
    periodic = {k: v for k, v in evaluated(out).items() if k.startswith(("R@", "mIoU"))}
    assert {k: metrics[k] for k in periodic} == pytest.approx(periodic)  # the periodic evaluation's figures
    predictions = [json.loads(line) for line in (results / "predictions.jsonl").read_text().splitlines()]
    assert len(predictions) == queries
    for record in predictions:
        duration = test[record["video"] + ".avi"]  # its reader's names, without the extension
        assert record["moments"] and all(0 <= s < e <= duration + 1e-3 for s, e in record["moments"])


# ------------------------------------------------------------ windows on the rows (items 11 and 9)

def test_windows_lie_on_the_rows_each_holding_as_many_and_none_twice():
    # rows of 16 frames at 29.4 fps (0.5442 s, TACoS's C3D rows); windows of 64 rows as a checkpoint records
    # them (34.8299 s, to 4 decimals): in seconds alone they held 64 or 65 rows
    duration, rows, length = 120 * 16 / 29.4, 120, round(64 * 16 / 29.4, 4)
    old = [window_rows(rows, duration, *span) for span in window_spans(duration, length, length / 2)]
    assert {last - first for first, last, _, _ in old} == {64, 65}  # the fault: windows a row apart
    spans = window_spans(duration, length, length / 2, rows)
    held = [window_rows(rows, duration, *span)[:2] for span in spans]
    assert held == [(0, 64), (32, 96), (56, 120)] and spans[-1][1] == duration
    assert window_spans(100.0, 40.0, 20.0, 100) == window_spans(100.0, 40.0, 20.0)  # one row a second: as before
    # no more rows than one window takes: one window, the whole video (not 23 windows of its one row)
    assert window_spans(600.0, 50.0, 25.0, 1) == [(0.0, 600.0)]
    assert window_spans(600.0, 50.0, 25.0, 2) == [(0.0, 300.0), (300.0, 600.0)]  # a window takes a row at least
    assert window_spans(600.0, 50.0, 25.0, 12) == [(50.0 * i, 50.0 * (i + 1)) for i in range(12)]  # a step of a row
    rng = np.random.default_rng(0)
    for _ in range(300):
        duration, total = float(rng.uniform(1, 4000)), int(rng.integers(1, 9000))
        length = float(rng.uniform(0.5, duration))
        spans = window_spans(duration, length, float(rng.uniform(0.05, 1)) * length, total)
        held = [window_rows(total, duration, *span) for span in spans]
        assert len({last - first for first, last, _, _ in held}) == 1 and held[-1][1] == total
        assert [first for first, _, _, _ in held] == sorted({first for first, _, _, _ in held})
        assert held[0][0] == 0 and all(last > first for first, last, _, _ in held)


def test_windows_in_seconds_add_no_window_for_a_rounding():
    # (0.4 - 0.3) / 0.1 is a hair above 1: a third start at 0.10000000000000003 held the second window again
    assert (0.4 - 0.3) / 0.1 > 1
    assert window_spans(0.4, 0.3, 0.1) == [(0.0, 0.3), (0.4 - 0.3, 0.4)]
    assert window_spans(0.9, 0.3, 0.3) == [(0.0, 0.3), (0.3, 0.6), (0.9 - 0.3, 0.9)]
    assert window_spans(0.8, 0.7, 0.1) == [(0.0, 0.7), (0.8 - 0.7, 0.8)]  # the last ends at the end exactly


def test_the_threshold_is_the_longest_training_video_and_the_log_says_where_it_comes_from():
    cfg = load_config(SYNTHETIC_CONFIG, [])
    span = {"median": 34.83, "longest": 62.0, "videos": 6}
    settings, said = window_settings(cfg, span)
    assert settings.longer_than == 62.0
    assert said.endswith("(length from the median of the 6 training videos); 62 s: the longest training video, "
                         "as the model took it in")
    settings, said = window_settings(cfg, {"median": 34.83, "longest": 30.0, "videos": 6})
    assert settings.longer_than == 34.83 and said.endswith(
        "34.83 s: the window's length, as the longest training video (30 s) is shorter")
    _, said = window_settings(load_config(SYNTHETIC_CONFIG, ["TEST.WINDOW.LONGER_THAN", "100.0"]), span)
    assert said.endswith("100 s: TEST.WINDOW.LONGER_THAN")
    _, said = window_settings(load_config(SYNTHETIC_CONFIG, ["TEST.WINDOW.LENGTH", "40.0"]), None)
    assert said.endswith("40 s: the window's length, as the checkpoint records no longest training video")


def test_the_trained_span_of_a_model_on_its_own_rows_keeps_the_longest_whole_video(synthetic_root):
    """MS-2D-TAN trains on windows of 128 rows (64 s) of the synthetic 24-80 s videos and evaluates whole
    videos: its windows' median is the window length, its longest the longest training video (80 s),
    which it scores whole as its reference does; a run trained by INPUT.TRAIN_WINDOW keeps the window."""
    from tan.data import RunData

    cfg = load_config(os.path.join(REPO, "configs", "ms2dtan_synthetic.yaml"),
                      ["DATASETS.ROOT", synthetic_root, "MODEL.DEVICE", "cpu"])
    span = RunData(cfg).trained_span()
    assert span["longest"] == 80.0 and span["median"] <= 64.0 and span["videos"] == 600
    cfg = load_config(SYNTHETIC_CONFIG, ["DATASETS.ROOT", synthetic_root, "INPUT.TRAIN_WINDOW.LENGTH", "30.0"])
    assert RunData(cfg).trained_span()["longest"] == 30.0


def test_an_evaluated_long_video_of_no_more_rows_than_a_window_is_scored_whole_and_named(caplog):
    """Windows would all hold its same rows: the evaluation's usual pass scores it, and the log says so."""
    settings = WindowSettings(50.0, 25.0, 80.0, 8, 20)
    rows = {"few": (1, 16), "many": (1200, 16), "short": (100, 16)}
    dataset = types.SimpleNamespace(name="mini_test", videos=["few", "many", "short"],
                                    video_ids=np.array([0, 0, 1, 2]), durations=np.array([600.0, 600.0, 600.0, 50.0]),
                                    features=types.SimpleNamespace(shapes=lambda videos: {v: rows[v] for v in videos}))
    import logging
    with caplog.at_level(logging.INFO, logger="tan"):
        chosen = WindowedEvaluation(None, settings).long_videos(dataset)
    assert chosen == {1: [2]}
    assert ("mini_test: 1 video longer than 80 s with no more feature rows than one window of 50 s takes, scored "
            "whole: few") in caplog.text


@pytest.fixture(scope="module")
def untrained(synthetic_root, tmp_path_factory):
    """A randomly initialised synthetic 2D-TAN saved as a training run saves it (median 50 s, longest 80 s)."""
    from tan.modeling import build_model
    from tan.engine.checkpoints import Checkpointer, run_info

    cfg = load_config(SYNTHETIC_CONFIG, ["DATASETS.ROOT", synthetic_root, "MODEL.DEVICE", "cpu"])
    torch.manual_seed(0)
    folder = str(tmp_path_factory.mktemp("untrained_windows"))
    Checkpointer(build_model(cfg), None, None, folder,
                 info=run_info(cfg, None, {"median": 50.0, "longest": 80.0, "videos": 600})).save("model_final")
    return os.path.join(folder, "model_final.pth")


@pytest.mark.parametrize("rows, said", [
    (1, "a video of 600.0 s: scored whole: it has 1 feature row, no more than one window of 50 s takes (1 at its "
        "rate)"),
    (1200, "a video of 600.0 s: grounded in 23 windows of 50 s (100 feature rows each) every 25 s"),
    (1190, "a video of 600.0 s: grounded in 23 windows of 49.92 s (99 feature rows each) every 25 s"),
])
def test_tan_predict_says_how_a_long_video_was_grounded(untrained, synthetic_root, tmp_path, rows, said):
    np.save(tmp_path / "video.npy", np.random.default_rng(rows).normal(size=(rows, 128)).astype(np.float32))
    proc = run_main("predict", "--ckpt", untrained, "--features", str(tmp_path / "video.npy"), "--duration", "600",
                    "--query", "the person opens the door.", "--json", "--topk", "3", "DATASETS.ROOT", synthetic_root)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert said in proc.stderr, proc.stderr[-2000:]
    moments = json.loads(proc.stdout)["queries"][0]["moments"]
    assert moments and all(0 <= m["start"] < m["end"] <= 600.0 + 1e-3 for m in moments)
