"""Everyday work after training, on the built-in dataset: evaluating with only
the test files, a checkpoint alone (its stored config), several checkpoints
compared in one call, the default checkpoint, the Python API against the
command-line tools, and predictions for a file of unlabelled queries."""
import csv
import json
import os
import shutil

import numpy as np
import pytest
import torch

import tan
from tan_apps.cli.arguments import ConfigArgumentParser, add_overrides
from tan_apps.cli.checkpoints import expand_checkpoints, result_names
from tan.config import load_config_text
from tan.config.choices import metric_names
from tan.errors import TanError

from conftest import SYNTHETIC_CONFIG, VALIDATED_RUN, run_main

# end-to-end: every test here uses a trained run or starts the tools
pytestmark = pytest.mark.slow

FAST = ["DATALOADER.NUM_WORKERS", "0", "MODEL.DEVICE", "cpu"]


@pytest.fixture(scope="module")
def run(validated_run):
    """The session's short run with a final test: model_{1,2,3}e, model_final and model_best."""
    cfg, out, _ = validated_run
    return cfg, out


def metrics_of(folder):
    with open(os.path.join(folder, "synthetic_test", "metrics.json")) as f:
        metrics = json.load(f)
    return {k: metrics[k] for k in metric_names()}


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def test_every_checkpoint_carries_the_run_config_and_the_version(run):
    cfg, out = run
    for name in ("model_1e.pth", "model_final.pth", "model_best.pth"):
        checkpoint = torch.load(out / name, weights_only=False)
        assert checkpoint["tan_version"] == tan.__version__
        stored = load_config_text(checkpoint["config"], name)
        assert stored == cfg and checkpoint["config"] == (out / "config.yml").read_text()


def test_a_checkpoint_alone_is_evaluated_to_the_figures_of_training(run, tmp_path):
    cfg, out = run
    moved = tmp_path / "downloaded"
    moved.mkdir()
    checkpoint = torch.load(out / "model_final.pth", weights_only=False)
    # Trained on a GPU machine: a stored MODEL.DEVICE becomes "auto" where the checkpoint is used.
    checkpoint["config"] = checkpoint["config"].replace("DEVICE: cpu", "DEVICE: cuda")
    assert "DEVICE: cuda" in checkpoint["config"]
    torch.save(checkpoint, moved / "model_final.pth")
    proc = run_main("test_net", "--ckpt", str(moved / "model_final.pth"), "DATASETS.ROOT", cfg.DATASETS.ROOT,
                    "DATALOADER.NUM_WORKERS", "0")
    assert proc.returncode == 0, proc.stderr[-3000:]
    # No --config-file and no OUTPUT_DIR: the stored config, results beside the checkpoint.
    assert metrics_of(moved / "inference" / "model_final") == metrics_of(out / "inference" / "model_final")
    assert not (moved / "run.lock").exists() and not (moved / "config.yml").exists()


def test_test_net_needs_only_the_test_files(run, tmp_path):
    """A user with a checkpoint and the test split only (features, annotations, word vectors)."""
    cfg, out = run
    synthetic = os.path.join(cfg.DATASETS.ROOT, "synthetic")
    root = tmp_path / "only_test"
    root.mkdir()
    shutil.copy(os.path.join(synthetic, "annotations", "test.json"), root / "test.json")
    shutil.copy(os.path.join(synthetic, "features", "synthetic_features.hdf5"), root / "features.hdf5")
    shutil.copy(os.path.join(synthetic, "word_vectors.txt"), root / "glove.txt")
    (root / "catalog.yaml").write_text(
        "mine_train: {annotations: train.json, features: features.hdf5, format: seconds}\n"
        "mine_val: {annotations: val.json, features: features.hdf5, format: seconds}\n"
        "mine_test: {annotations: test.json, features: features.hdf5, format: seconds}\n")
    data = ["DATASETS.ROOT", str(root), "DATASETS.CATALOG", "catalog.yaml", "INPUT.WORD_VECTORS", "glove.txt",
            "DATASETS.TRAIN", "('mine_train',)", "DATASETS.VAL", "('mine_val',)", "DATASETS.TEST", "('mine_test',)"]
    proc = run_main("test_net", "--ckpt", str(out / "model_final.pth"), "OUTPUT_DIR", str(tmp_path / "res"),
                    *data, *FAST)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(tmp_path / "res" / "inference" / "model_final" / "mine_test" / "metrics.json") as f:
        only_test = json.load(f)
    assert {k: only_test[k] for k in metric_names()} == metrics_of(out / "inference" / "model_final")
    # tan-predict with a features file and a duration reads no dataset file at all.
    import h5py
    with h5py.File(root / "features.hdf5", "r") as f:
        np.save(tmp_path / "clip.npy", np.asarray(f["syn_test_0003"]))
    proc = run_main("predict", "--ckpt", str(out / "model_final.pth"), "--features", str(tmp_path / "clip.npy"),
                    "--duration", "46.5", "--query", "the cook holds the pan.", "--json", *data, *FAST)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(json.loads(proc.stdout)["queries"][0]["moments"]) == 5
    # Training with the same files still says what is missing.
    proc = run_main("train_net", "--config-file", SYNTHETIC_CONFIG, "OUTPUT_DIR", str(tmp_path / "train"),
                    *data, *FAST)
    assert proc.returncode == 2 and "train.json" in proc.stderr and "not found" in proc.stderr


def test_three_checkpoints_are_compared_in_one_call(run, tmp_path):
    cfg, out = run
    results = tmp_path / "compare"
    proc = run_main("test_net", "--ckpt", str(out / "model_1e.pth"), str(out / "model_2e.pth"),
                    str(out / "model_final.pth"), "OUTPUT_DIR", str(results), "DATASETS.ROOT", cfg.DATASETS.ROOT,
                    *FAST)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads((results / "inference" / "comparison.json").read_text())
    assert [r["name"] for r in rows] == ["model_1e", "model_2e", "model_final"]
    for row in rows:
        assert row["dataset"] == "synthetic_test" and row["checkpoint"] == str(out / f"{row['name']}.pth")
        assert {k: row[k] for k in metric_names()} == metrics_of(results / "inference" / row["name"])
    with open(results / "inference" / "comparison.csv") as f:
        table = list(csv.DictReader(f))
    assert [r["name"] for r in table] == ["model_1e", "model_2e", "model_final"]
    assert float(table[2]["R@1,IoU@0.5"]) == pytest.approx(rows[2]["R@1,IoU@0.5"], abs=1e-4)
    # printed too, one line per checkpoint
    assert sum(line.startswith(("model_1e ", "model_2e ", "model_final ")) for line in proc.stdout.splitlines()) == 3
    # The final model evaluated here equals the final test of the training run.
    assert metrics_of(results / "inference" / "model_final") == metrics_of(out / "inference" / "model_final")


def test_a_folder_gives_its_checkpoints_in_epoch_order_and_names_stay_distinct(run, tmp_path):
    _, out = run
    found = [os.path.basename(p) for p in expand_checkpoints([str(out)])]
    epochs = [p for p in found if p not in ("model_final.pth", "model_best.pth")]
    assert found == epochs + ["model_final.pth", "model_best.pth"]
    assert epochs == sorted(epochs, key=lambda p: int(p[len("model_"):-len("e.pth")]))
    assert expand_checkpoints([str(out / "model_*e.pth"), str(out / "model_2e.pth")]) == \
        [str(out / p) for p in epochs]  # a glob, and a file given twice counted once
    with pytest.raises(TanError, match="no file matches"):
        expand_checkpoints([str(out / "nothing_*.pth")])
    with pytest.raises(TanError, match="not found"):
        expand_checkpoints([str(out / "model_99e.pth")])
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert result_names([str(tmp_path / "a" / "model_best.pth"), str(tmp_path / "b" / "model_best.pth")]) == \
        ["a_model_best", "b_model_best"]


def test_options_of_several_values_stop_at_the_config_overrides():
    parser = ConfigArgumentParser()
    parser.add_argument("--ckpt", nargs="+", default=[])
    parser.add_argument("--skip-test", action="store_true")
    add_overrides(parser)
    args = parser.parse_args(["--ckpt", "a.pth", "run/b.pth", "OUTPUT_DIR", "x", "--skip-test", "SOLVER.LR", "0.1"])
    assert args.ckpt == ["a.pth", "run/b.pth"] and args.skip_test
    assert args.opts == ["OUTPUT_DIR", "x", "SOLVER.LR", "0.1"]


def test_a_checkpoint_without_config_needs_a_config_file(run, tmp_path):
    cfg, out = run
    bare = torch.load(out / "model_final.pth", weights_only=False)
    del bare["config"]  # what the reference's checkpoints look like
    torch.save(bare, tmp_path / "reference.pth")
    proc = run_main("test_net", "--ckpt", str(tmp_path / "reference.pth"), *FAST)
    assert proc.returncode == 2 and "carries no config" in proc.stderr and "--config-file" in proc.stderr
    proc = run_main("test_net", "--config-file", SYNTHETIC_CONFIG, "--ckpt", str(tmp_path / "reference.pth"),
                    "DATASETS.ROOT", cfg.DATASETS.ROOT, "OUTPUT_DIR", str(tmp_path / "res"), *FAST)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert metrics_of(tmp_path / "res" / "inference" / "reference") == metrics_of(out / "inference" / "model_final")


def test_a_checkpoint_that_does_not_fit_the_config_names_the_parameters(run):
    _, out = run
    proc = run_main("test_net", "--ckpt", str(out / "model_final.pth"), "MODEL.TAN.PREDICTOR.HIDDEN_SIZE", "32",
                    *FAST)
    output = proc.stdout + proc.stderr  # once logging is set up, the error is logged
    assert proc.returncode == 2
    assert "shape mismatch" in output and "predictor.convs.0.weight: checkpoint [64, 64, 3, 3] vs model [32, 64, 3, 3]" in output


def test_the_tools_share_one_default_checkpoint(run, tmp_path):
    """tan-test, tan-predict and tan-visualize without --ckpt: the latest (model_final), so that
    --worst reads the predictions of the model it draws."""
    cfg, out = run
    args = ["--config-file", SYNTHETIC_CONFIG, "DATASETS.ROOT", cfg.DATASETS.ROOT, "OUTPUT_DIR", str(out), *VALIDATED_RUN]
    proc = run_main("predict", *args, "--video", "syn_test_0003", "--query", "the cook holds the pan.", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["checkpoint"] == str(out / "model_final.pth")
    pytest.importorskip("matplotlib")
    proc = run_main("visualize", "scores", *args[:2], "--worst", "2", "--out", str(tmp_path / "pics"), *args[2:])
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = read_jsonl(out / "inference" / "model_final" / "synthetic_test" / "predictions.jsonl")
    worst = sorted(records, key=lambda r: (r["ious"][0] if r["ious"] else 0.0, r["index"]))[:2]
    assert sorted(os.listdir(tmp_path / "pics")) == sorted(f"synthetic_test_{r['index']:06d}.png" for r in worst)


def test_the_api_reproduces_the_test_figures_of_the_cli(run):
    """Each test video encoded once, all its sentences in one batch: the metrics of tan-test."""
    cfg, out = run
    from tan.data import RunData, VideoSource
    from tan.evaluation import evaluate_moments
    model = tan.load_model(str(out / "model_final.pth"), overrides=["DATASETS.ROOT", cfg.DATASETS.ROOT])
    assert isinstance(model, tan.Grounder) and model.cfg.MODEL.TAN == cfg.MODEL.TAN
    assert model.cfg.DATASETS == cfg.DATASETS and model.cfg.MODEL.DEVICE == "auto"  # the stored one is not forced
    dataset = RunData(cfg).dataset("synthetic_test")
    kept = torch.zeros(len(dataset), 5, 2)
    filled = torch.zeros(len(dataset), 5, dtype=torch.bool)
    by_video = {}
    for index in range(len(dataset)):
        by_video.setdefault(dataset.video_ids[index], []).append(index)
    source = VideoSource(RunData(cfg))
    for video_id, indices in by_video.items():
        name = dataset.videos[video_id]
        video = model.encode_video(source.features(name), float(dataset.durations[indices[0]]))
        answers = model.ground(video, [dataset.sentences[i] for i in indices], topk=5)
        for index, moments in zip(indices, answers):
            assert all(isinstance(m, tan.Moment) for m in moments)
            assert [m.score for m in moments] == sorted((m.score for m in moments), reverse=True)
            kept[index, :len(moments)] = torch.tensor([[m.start, m.end] for m in moments])
            filled[index, :len(moments)] = True
    api = evaluate_moments(kept, filled, torch.from_numpy(dataset.moments))
    cli = metrics_of(out / "inference" / "model_final")
    assert api == pytest.approx(cli, abs=0.2)  # same model and data; batch shapes may move a near-tie


def predict_both_ways(cfg, out, sentences, topk, video_name="syn_test_0003"):
    """tan-predict (its JSON report) and the API on one video of the run in ``out``: the
    same moments and scores, to the printed digits. Returns (model, encoded video, answers)."""
    asked = sum((["--query", s] for s in sentences), [])
    proc = run_main("predict", "--ckpt", str(out / "model_final.pth"), "--video", video_name, *asked,
                    "--topk", str(topk), "--json", "DATASETS.ROOT", cfg.DATASETS.ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    from tan.data import RunData, VideoSource
    model = tan.load_model(str(out / "model_final.pth"), device=torch.device("cpu"),
                           overrides=["DATASETS.ROOT", cfg.DATASETS.ROOT])
    data = VideoSource(RunData(cfg))
    video = model.encode_video(data.features(video_name), data.duration(video_name))
    answers = model.ground(video, sentences, topk=topk)
    for query, moments in zip(report["queries"], answers):
        assert len(query["moments"]) == len(moments) == topk
        assert [[m["start"], m["end"], m["score"]] for m in query["moments"]] == \
            [[round(m.start, 3), round(m.end, 3), round(m.score, 6)] for m in moments]
    return model, video, answers


def test_the_api_equals_tan_predict(run):
    cfg, out = run
    sentences = ["the cook holds the pan.", "a person opens the door.", "someone walks to the table."]
    model, video, answers = predict_both_ways(cfg, out, sentences, topk=7)
    from tan.data import RunData, VideoSource
    data = VideoSource(RunData(cfg))
    maps = model.score_maps(video, sentences)
    assert maps.shape == (3, cfg.MODEL.TAN.NUM_CLIPS, cfg.MODEL.TAN.NUM_CLIPS)
    assert float(maps[0].max()) == pytest.approx(answers[0][0].score, abs=1e-6)
    with pytest.raises(TanError, match="list of sentences"):
        model.ground(video, "one sentence")
    with pytest.raises(TanError, match=f"expected \\[T, {cfg.MODEL.TAN.FEATPOOL.INPUT_SIZE}\\]"):
        model.encode_video(np.zeros((10, 7), np.float32), 30.0)
    with pytest.raises(TanError, match="duration"):
        model.encode_video(data.features("syn_test_0003"), -1)


def test_unlabelled_queries_are_predicted_in_both_formats(run, tmp_path):
    cfg, out = run
    queries = tmp_path / "queries.jsonl"
    lines = [{"qid": 11, "vid": "syn_test_0003", "query": "the cook holds the pan."},
             {"vid": "syn_test_0007", "query": "a person opens the door.", "duration": 42.5},
             {"qid": "q3", "vid": "syn_test_0003", "query": "someone walks to the table."},
             {"qid": "q4", "vid": "syn_test_0003", "query": "the cook holds the pan.", "duration": 20.0}]
    queries.write_text("".join(json.dumps(x) + "\n" for x in lines) + "\n")
    common = ["--ckpt", str(out / "model_final.pth"), "--queries", str(queries), "--topk", "10",
              "DATASETS.ROOT", cfg.DATASETS.ROOT]
    proc = run_main("predict", *common, "--format", "lighthouse", "--output", str(tmp_path / "lh.jsonl"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    lighthouse = read_jsonl(tmp_path / "lh.jsonl")
    assert [r["qid"] for r in lighthouse] == [11, 1, "q3", "q4"]  # a missing qid: the query's position
    assert [set(r) for r in lighthouse] == [{"qid", "query", "vid", "pred_relevant_windows"}] * 4
    assert [r["vid"] for r in lighthouse] == ["syn_test_0003", "syn_test_0007", "syn_test_0003", "syn_test_0003"]
    for r in lighthouse:
        windows = r["pred_relevant_windows"]
        assert len(windows) == 10 and all(len(w) == 3 and 0 <= w[0] < w[1] for w in windows)
        assert [w[2] for w in windows] == sorted((w[2] for w in windows), reverse=True)
    assert max(w[1] for w in lighthouse[1]["pred_relevant_windows"]) <= 42.5  # the line's duration
    proc = run_main("predict", *common)  # our format, on stdout
    assert proc.returncode == 0, proc.stderr[-3000:]
    ours = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["sentence"] for r in ours] == [x["query"] for x in lines]
    # Each line's own duration, else the annotations' (46.5 s), never another line's.
    assert [r["duration"] for r in ours] == [46.5, 42.5, 46.5, 20.0]
    assert max(m[1] for m in ours[3]["moments"]) <= 20.0
    for mine, theirs in zip(ours, lighthouse):
        assert [m + [s] for m, s in zip(mine["moments"], mine["scores"])] == theirs["pred_relevant_windows"]
    # The one-video form gives the same moments.
    proc = run_main("predict", "--ckpt", str(out / "model_final.pth"), "--video", "syn_test_0003", "--query",
                    lines[0]["query"], "--topk", "10", "--json", "DATASETS.ROOT", cfg.DATASETS.ROOT)
    single = json.loads(proc.stdout)["queries"][0]["moments"]
    assert [x for m in single for x in (m["start"], m["end"])] == \
        pytest.approx([x for m in ours[0]["moments"] for x in m], abs=1e-3)


def test_a_bad_query_line_is_named(run, tmp_path):
    _, out = run
    queries = tmp_path / "queries.jsonl"
    queries.write_text('{"vid": "syn_test_0003", "query": "the cook holds the pan."}\n{"vid": "syn_test_0003"}\n')
    before = "earlier predictions\n"
    (tmp_path / "out.jsonl").write_text(before)
    proc = run_main("predict", "--ckpt", str(out / "model_final.pth"), "--queries", str(queries),
                    "--output", str(tmp_path / "out.jsonl"))
    assert proc.returncode == 2 and f"{queries}:2" in proc.stderr and '"query"' in proc.stderr
    assert (tmp_path / "out.jsonl").read_text() == before
