"""The researcher's tools on the built-in dataset: predictions file, best model,
predict, pictures, TensorBoard, progress bars and the console scripts."""
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest
import torch

from tan.config import load_config
from tan.evaluation import evaluate_moments
from tan.engine.hooks import BestModel
from tan.engine.state import TrainingState
from tan.errors import TanError

from conftest import SYNTHETIC_CONFIG, VALIDATED_RUN, run_main

# end-to-end: every test here uses a trained run or starts the tools
pytestmark = pytest.mark.slow

def tensorboard_installed():
    from tan.utils.events import tensorboard_available
    return tensorboard_available()


@pytest.fixture(scope="module")
def run(validated_run):
    """The session's short run that validates every epoch (and writes TensorBoard scalars when possible)."""
    return validated_run


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def test_predictions_file_has_every_test_query_and_agrees_with_the_metrics(run):
    cfg, out, _ = run
    folder = out / "inference" / "model_final" / "synthetic_test"
    records = read_jsonl(folder / "predictions.jsonl")
    metrics = json.loads((folder / "metrics.json").read_text())
    assert [r["index"] for r in records] == list(range(metrics["num_queries"]))
    first = records[0]
    assert set(first) == {"index", "video", "sentence", "duration", "gt", "moments", "scores", "ious"}
    assert first["video"].startswith("syn_test_") and first["sentence"]
    for r in records:
        assert 1 <= len(r["moments"]) <= 5 and len(r["scores"]) == len(r["moments"]) == len(r["ious"])
        assert r["scores"] == sorted(r["scores"], reverse=True)
        for (s, e), iou in zip(r["moments"], r["ious"]):
            inter = max(0.0, min(e, r["gt"][1]) - max(s, r["gt"][0]))
            union = max(e, r["gt"][1]) - min(s, r["gt"][0])
            assert iou == pytest.approx(inter / union, abs=2e-3)
            assert 0 <= s < e <= r["duration"] + 1e-3
    # the metrics recomputed from the file are those reported
    k = 5
    moments = torch.zeros(len(records), k, 2)
    filled = torch.zeros(len(records), k, dtype=torch.bool)
    for q, r in enumerate(records):
        moments[q, :len(r["moments"])] = torch.tensor(r["moments"])
        filled[q, :len(r["moments"])] = True
    recomputed = evaluate_moments(moments, filled, torch.tensor([r["gt"] for r in records]))
    for key, value in recomputed.items():
        assert value == pytest.approx(metrics[key], abs=0.35), key  # rounding of the stored seconds


def test_best_model_is_the_epoch_with_the_highest_validation_metric(run):
    cfg, out, proc = run
    val = [r for r in read_jsonl(out / "metrics.jsonl") if r.get("dataset") == "synthetic_val"]
    assert [r["epoch"] for r in val] == [1, 2, 3]
    values = [r["R@1,IoU@0.5"] for r in val]
    expected_epoch = val[values.index(max(values))]["epoch"]  # first maximum: ties keep the earlier epoch
    best = torch.load(out / "model_best.pth", weights_only=False)
    assert best["epoch"] == expected_epoch
    assert best["best"]["value"] == pytest.approx(max(values)) and best["best"]["metric"] == "R@1,IoU@0.5"
    assert set(best) == {"model", "epoch", "best", "config", "tan_version", "trained_span"}  # weights only, and what they are
    # it holds that epoch's weights: the epoch checkpoint of the same epoch is identical
    epoch_ckpt = torch.load(out / f"model_{expected_epoch}e.pth", weights_only=False)
    for key, value in best["model"].items():
        assert torch.equal(value, epoch_ckpt["model"][key])
    # the final test reports both models
    assert (out / "inference" / "model_best" / "synthetic_test" / "metrics.json").is_file()
    assert "final model" in proc.stdout and f"best model (epoch {expected_epoch})" in proc.stdout
    assert (out / "last_checkpoint").read_text() == "model_final.pth"


class _FakeCheckpointer:
    def __init__(self):
        self.saved = []

    def save_weights(self, name, **info):
        self.saved.append((name, info["epoch"]))


def test_best_selection_on_a_known_sequence_keeps_the_first_maximum():
    state, checkpointer = TrainingState(), _FakeCheckpointer()
    best_model = BestModel("R@1,IoU@0.5", checkpointer)
    for epoch, value in enumerate([10.0, 30.0, 30.0, 20.0, 29.9], 1):
        best_model.update(state, {"val_a": {"R@1,IoU@0.5": value}, "val_b": {"R@1,IoU@0.5": 99.0}}, epoch)
    assert checkpointer.saved == [("model_best", 1), ("model_best", 2)]
    assert state.best == {"metric": "R@1,IoU@0.5", "value": 30.0, "epoch": 2, "dataset": "val_a"}


def test_resume_takes_the_best_so_far_from_the_checkpoint_and_model_best_only_from_before_it(tmp_path):
    best = {"metric": "R@1,IoU@0.5", "value": 41.0, "epoch": 3, "dataset": "synthetic_val"}
    torch.save({"model": {}, "epoch": 3, "best": best}, tmp_path / "model_best.pth")
    checkpointer = _FakeCheckpointer()
    checkpointer.save_dir = str(tmp_path)
    older = {"metric": "R@1,IoU@0.5", "value": 12.0, "epoch": 2, "dataset": "synthetic_val"}
    # saved at the end of epoch 3, before its validation: that validation is done again
    state = TrainingState(epoch=4, iteration=30, best=older)
    BestModel("R@1,IoU@0.5", checkpointer).recover(state)
    assert state.best == older
    # saved mid-epoch 4 by a version that kept no best in checkpoints: epoch 3's came before it
    state = TrainingState(epoch=4, iteration=33, iter_in_epoch=3)
    BestModel("R@1,IoU@0.5", checkpointer).recover(state)
    assert state.best == best


def test_a_resumed_run_validates_again_the_epoch_its_checkpoint_came_before(run, tmp_path):
    """model_{e}e.pth is saved before epoch e's validation: a run resumed from it validates epoch e
    again, and model_best.pth (here one made up after the checkpoint) follows that validation."""
    cfg, src, _ = run
    out = tmp_path / "resumed"
    out.mkdir()
    checkpoint = torch.load(src / "model_2e.pth", weights_only=False)
    checkpoint.pop("best")  # saved before any validation that counts here
    torch.save(checkpoint, out / "model_2e.pth")
    (out / "last_checkpoint").write_text("model_2e.pth")
    best = torch.load(src / "model_best.pth", weights_only=False)
    best["best"] = dict(best["best"], value=100.0, epoch=2)  # as if epoch 2 had been perfect
    best["epoch"] = 2
    torch.save(best, out / "model_best.pth")
    args = ["--config-file", SYNTHETIC_CONFIG, "DATASETS.ROOT", cfg.DATASETS.ROOT, "OUTPUT_DIR", str(out),
            *VALIDATED_RUN, "--skip-test"]
    proc = run_main("train_net", *args)
    assert proc.returncode == 0, proc.stdout[-3000:]
    kept = torch.load(out / "model_best.pth", weights_only=False)
    validated = {r["epoch"]: r for r in map(json.loads, open(out / "metrics.jsonl")) if "dataset" in r}
    assert 2 in validated and kept["best"]["value"] != 100.0
    assert kept["best"]["value"] == max(r["R@1,IoU@0.5"] for r in validated.values())
    assert torch.load(out / "model_final.pth", weights_only=False)["best"] == kept["best"]


def predict_json(cfg, out, *args):
    proc = run_main("predict", "--config-file", SYNTHETIC_CONFIG, "--json", *args, "DATASETS.ROOT",
                    cfg.DATASETS.ROOT, "OUTPUT_DIR", str(out), "MODEL.DEVICE", "cpu")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_predict_gives_the_models_own_top_moments(run):
    cfg, out, _ = run
    records = read_jsonl(out / "inference" / "model_final" / "synthetic_test" / "predictions.jsonl")
    video = records[0]["video"]
    mine = [r for r in records if r["video"] == video]
    report = predict_json(cfg, out, "--ckpt", str(out / "model_final.pth"), "--video", video,
                          *sum((["--query", r["sentence"]] for r in mine), []))
    assert report["video"] == video and report["duration"] == pytest.approx(mine[0]["duration"], abs=1e-3)
    assert len(report["queries"]) == len(mine)
    for query, record in zip(report["queries"], mine):
        assert query["sentence"] == record["sentence"]
        got = [x for m in query["moments"] for x in (m["start"], m["end"])]
        assert got == pytest.approx([x for m in record["moments"] for x in m], abs=2e-3)
        assert [m["score"] for m in query["moments"]] == pytest.approx(record["scores"], abs=1e-5)

    # ... and the top moment is the arg-max cell of the model's own score map
    from tan.data import RunData, SentenceEncoder, VideoSource
    from tan.engine.prediction import load_trained_model, predict
    model = load_trained_model(cfg, str(out / "model_final.pth"), torch.device("cpu"))
    data = RunData(cfg)
    feats = VideoSource(data).features(video)
    encoded = SentenceEncoder.from_config(cfg)([mine[0]["sentence"]])
    _, scores, _, maps = predict(model, cfg, feats, mine[0]["duration"], encoded, torch.device("cpu"))
    n = cfg.MODEL.TAN.NUM_CLIPS
    cell = int(maps[0].flatten().argmax())
    unit = mine[0]["duration"] / n
    top = report["queries"][0]["moments"][0]
    assert [top["start"], top["end"]] == pytest.approx([(cell // n) * unit, (cell % n + 1) * unit], abs=2e-3)
    assert top["score"] == pytest.approx(float(maps[0].max()), abs=1e-5)


def test_predict_from_a_npy_file_equals_predict_from_the_video_id(run, tmp_path):
    cfg, out, _ = run
    from tan.data import RunData, VideoSource
    video = "syn_test_0003"
    source = VideoSource(RunData(cfg))
    np.save(tmp_path / "clip.npy", source.features(video))
    duration = source.duration(video)
    query = ["--query", "the cook holds the pan.", "--topk", "3"]
    by_id = predict_json(cfg, out, "--video", video, *query)
    by_file = predict_json(cfg, out, "--features", str(tmp_path / "clip.npy"), "--duration", str(duration), *query)
    assert by_file["queries"] == by_id["queries"] and len(by_id["queries"][0]["moments"]) == 3
    import h5py
    with h5py.File(tmp_path / "mine.hdf5", "w") as f:  # group-per-video layout, duration given
        f.create_group(video).create_dataset("c3d_features", data=np.load(tmp_path / "clip.npy"))
    by_hdf5 = predict_json(cfg, out, "--features", str(tmp_path / "mine.hdf5"), "--video", video,
                           "--duration", str(duration), *query)
    assert by_hdf5["queries"] == by_id["queries"]
    # one video's .npz (array "features"), and a folder of per-video files named by --video
    (tmp_path / "folder").mkdir()
    np.savez(tmp_path / "folder" / f"{video}.npz", features=np.load(tmp_path / "clip.npy"))
    by_npz = predict_json(cfg, out, "--features", str(tmp_path / "folder" / f"{video}.npz"),
                          "--duration", str(duration), *query)
    by_folder = predict_json(cfg, out, "--features", str(tmp_path / "folder"), "--video", video,
                             "--duration", str(duration), *query)
    assert by_npz["queries"] == by_folder["queries"] == by_id["queries"]
    assert by_id["checkpoint"].endswith("model_final.pth")  # the default: the latest


@pytest.mark.parametrize("args,message", [
    (["--video", "no_such_video", "--query", "the cook holds the pan."], "no_such_video"),
    (["--features", "missing.npy", "--duration", "3", "--query", "x"], "missing.npy"),
    (["--video", "syn_test_0003", "--query", "zzzz qqqq"], "no word with a word vector"),
])
def test_predict_reports_bad_input_clearly(run, args, message):
    cfg, out, _ = run
    proc = run_main("predict", "--config-file", SYNTHETIC_CONFIG, *args, "DATASETS.ROOT", cfg.DATASETS.ROOT,
                    "OUTPUT_DIR", str(out), "MODEL.DEVICE", "cpu")
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr


def png_size(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_visualize_writes_score_maps_and_curves_of_the_expected_size(run, tmp_path):
    pytest.importorskip("matplotlib")
    cfg, out, _ = run
    proc = run_main("visualize", "scores", "--config-file", SYNTHETIC_CONFIG, "--index", "0", "--worst", "2",
                    "--out", str(tmp_path / "pics"), "DATASETS.ROOT", cfg.DATASETS.ROOT, "OUTPUT_DIR", str(out),
                    "MODEL.DEVICE", "cpu")
    assert proc.returncode == 0, proc.stderr[-3000:]
    pictures = sorted(os.listdir(tmp_path / "pics"))
    assert len(pictures) == 3 and "synthetic_test_000000.png" in pictures
    for name in pictures:
        assert png_size(tmp_path / "pics" / name) == (1300, 550)
    proc = run_main("visualize", "curves", "--metrics", str(out), "--out", str(tmp_path / "curves.png"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert png_size(tmp_path / "curves.png") == (1500, 450)


def test_pictures_without_matplotlib_fail_with_an_install_hint(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    from tan.utils.plots import draw_curves
    with pytest.raises(TanError, match=r"pip install 'tan\[viz\]'"):
        draw_curves(str(tmp_path / "c.png"), [], [])


def test_tensorboard_scalars_are_written_when_asked(run):
    if not tensorboard_installed():
        pytest.skip("tensorboard is not installed")
    _, out, _ = run
    files = os.listdir(out / "tensorboard")
    assert any(f.startswith("events.out.tfevents") for f in files)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    events = EventAccumulator(str(out / "tensorboard"))
    events.Reload()
    tags = events.Tags()["scalars"]
    assert "train/loss" in tags and "train/lr" in tags
    validation = EventAccumulator(str(out / "tensorboard" / "val"))  # by epoch, beside the steps' scalars
    validation.Reload()
    assert [e.step for e in validation.Scalars("val/synthetic_val/R@1,IoU@0.5")] == [1, 2, 3]


def test_tensorboard_switch_without_the_package_is_a_clear_error(monkeypatch):
    from tan.utils import events
    monkeypatch.setattr(events, "tensorboard_available", lambda: False)
    cfg = load_config(SYNTHETIC_CONFIG, ["TENSORBOARD", "True"])
    with pytest.raises(TanError, match="TENSORBOARD is True but the tensorboard package is not installed"):
        events.check_tensorboard(cfg)


def test_progress_bars_only_on_a_terminal(run, monkeypatch):
    _, _, proc = run
    assert "it/s" not in proc.stderr and "\r" not in proc.stderr  # not a terminal: plain log lines
    assert "iter: 10/10" in proc.stdout
    from tqdm import tqdm
    from tan.utils import progress
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    bar = progress.progress(range(3), total=3, desc="x")
    assert isinstance(bar, tqdm) and list(bar) == [0, 1, 2]
    bar.close()
    monkeypatch.setenv("TAN_PROGRESS", "0")
    assert progress.progress(range(3)) == range(3)


@pytest.mark.parametrize("command", ["tan-train", "tan-test", "tan-predict", "tan-visualize", "tan-check-data",
                                     "tan-convert-features"])
def test_console_scripts_explain_their_arguments(command):
    path = shutil.which(command) or shutil.which(command, path=os.path.dirname(sys.executable))
    if path is None:
        pytest.skip(f"{command} is not installed (pip install -e .)")
    help_text = subprocess.run([path, "--help"], stdout=subprocess.PIPE, text=True, timeout=120).stdout
    assert "Example" in help_text and "--" in help_text
    if command == "tan-visualize":
        for sub in ("scores", "curves"):
            sub_help = subprocess.run([path, sub, "--help"], stdout=subprocess.PIPE, text=True, timeout=120).stdout
            assert "Example" in sub_help and "--out" in sub_help
