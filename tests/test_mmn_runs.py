"""MMN end to end on the built-in dataset: training, the checkpoint in
tan-test, tan-predict, the API and tan-visualize; two processes under
torchrun; an exact resume mid-epoch; DistilBERT frozen then trained;
mixed precision and torch.compile."""
import json
import os
import signal
import subprocess
import sys

import pytest
import torch

from tan.config import load_config

from conftest import ONE_THREAD, REPO, run_main, run_tool, with_overrides
from runs import signal_after_record
from test_distributed import torchrun
from test_mmn import write_tiny_distilbert
from test_workflows import predict_both_ways

pytestmark = pytest.mark.slow

MMN_SYNTHETIC = os.path.join(REPO, "configs", "mmn_synthetic.yaml")
SHORT = ["MODEL.DEVICE", "cpu", "DATALOADER.NUM_WORKERS", "0", "SOLVER.LOG_PERIOD", "5"]


def train_args(root, out, *extra):
    return ["--config-file", MMN_SYNTHETIC, *with_overrides(["DATASETS.ROOT", root, "OUTPUT_DIR", str(out), *SHORT],
                                                             *extra)]


def metrics(folder):
    return json.loads((folder / "synthetic_test" / "metrics.json").read_text())


@pytest.fixture(scope="module")
def run(synthetic_root, tmp_path_factory):
    """A short MMN run: 2 epochs, evaluated after the second."""
    out = tmp_path_factory.mktemp("mmn") / "run"
    proc = run_main("train_net", *train_args(synthetic_root, out, "SOLVER.MAX_EPOCH", "2", "SOLVER.TEST_PERIOD", "2"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return load_config(MMN_SYNTHETIC, ["DATASETS.ROOT", synthetic_root]), out


def test_mmn_trains_logs_its_loss_terms_and_evaluates(run, tmp_path):
    cfg, out = run
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if "iter" in r]
    assert all({"loss_iou", "loss_vid", "loss_sent"} <= set(r) for r in steps)
    assert steps[-1]["loss"] < steps[0]["loss"]
    assert any(r.get("dataset") == "synthetic_val" for r in records)  # periodic evaluation on val
    final = metrics(out / "inference" / "model_final")
    assert final["num_queries"] == 602 and final["R@1,IoU@0.5"] > 30  # untrained: about 10
    stored = torch.load(out / "model_final.pth", weights_only=False)
    assert "MMN" in stored["config"] and "proposal_conv.bn.0.running_mean" in stored["model"]
    # the checkpoint alone, in another folder: the same figures
    proc = run_main("test_net", "--ckpt", str(out / "model_final.pth"), "OUTPUT_DIR", str(tmp_path / "eval"),
                    "DATASETS.ROOT", cfg.DATASETS.ROOT, "MODEL.DEVICE", "cpu")
    assert proc.returncode == 0, proc.stderr[-3000:]
    again = metrics(tmp_path / "eval" / "inference" / "model_final")
    assert {k: v for k, v in again.items() if k != "checkpoint"} == {k: v for k, v in final.items() if k != "checkpoint"}


def test_a_checkpoint_in_mmns_layout_evaluates_with_test_net(run, tmp_path):
    """As MMN's released files: {"model": names with "module.", "optimizer", "epoch"}, no config."""
    cfg, out = run
    state = torch.load(out / "model_final.pth", weights_only=False)["model"]
    released = tmp_path / "pool_model_2e.pth"
    torch.save({"model": {f"module.{k}": v for k, v in state.items()}, "optimizer": {}, "epoch": 2}, released)
    proc = run_main("test_net", "--ckpt", str(released), "DATASETS.ROOT", cfg.DATASETS.ROOT)
    assert proc.returncode == 2 and "--config-file" in proc.stderr  # no stored config: say what to add
    proc = run_main("test_net", "--config-file", MMN_SYNTHETIC, "--ckpt", str(released), "OUTPUT_DIR",
                    str(tmp_path / "eval"), "DATASETS.ROOT", cfg.DATASETS.ROOT, "MODEL.DEVICE", "cpu")
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = metrics(tmp_path / "eval" / "inference" / "pool_model_2e")
    want = metrics(out / "inference" / "model_final")
    assert {k: v for k, v in got.items() if k != "checkpoint"} == {k: v for k, v in want.items() if k != "checkpoint"}


def test_predict_the_api_and_pictures_with_mmn(run, tmp_path):
    cfg, out = run
    sentences = ["the cook holds the pan.", "a person opens the door."]
    model, video, answers = predict_both_ways(cfg, out, sentences, topk=5)
    maps = model.score_maps(video, sentences)
    assert maps.shape == (2, 16, 16) and float(maps.min()) >= 0
    assert float(maps[0].max()) == pytest.approx(answers[0][0].score, abs=1e-6)
    pytest.importorskip("matplotlib")
    proc = run_main("visualize", "scores", "--ckpt", str(out / "model_final.pth"), "--worst", "2",
                    "--out", str(tmp_path / "pics"), "DATASETS.ROOT", cfg.DATASETS.ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(os.listdir(tmp_path / "pics")) == 2
    import matplotlib.pyplot as plt
    drawn = []
    original = plt.Axes.plot

    def recording_plot(self, *args, **kwargs):
        drawn.append(kwargs.get("label"))
        return original(self, *args, **kwargs)

    from tan.utils import plots
    from unittest import mock
    with mock.patch.object(plt.Axes, "plot", recording_plot):
        plots.draw_curves(str(tmp_path / "curves.png"), *plots.read_metrics(str(out / "metrics.jsonl")))
    assert {"loss_iou", "loss_vid", "loss_sent"} <= set(drawn)  # MMN's loss terms are drawn one by one
    assert (tmp_path / "curves.png").stat().st_size > 0


def test_two_processes_train_mmn(synthetic_root, tmp_path):
    out = tmp_path / "ddp"
    proc = torchrun(*train_args(synthetic_root, out, "SOLVER.MAX_EPOCH", "2", "SOLVER.ITERS_PER_EPOCH", "10",
                                "SOLVER.TEST_PERIOD", "2"))
    assert proc.returncode == 0, proc.stdout[-4000:]
    log = (out / "log.txt").read_text()
    assert "using 2 process(es)" in log and log.count("start training") == 1
    final = metrics(out / "inference" / "model_final")
    assert final["num_queries"] == 602  # every query once, whatever the padding of the video sampler


def resume_args(root, out):
    return train_args(root, out, "SOLVER.MAX_EPOCH", "2", "SOLVER.ITERS_PER_EPOCH", "12", "SOLVER.TEST_PERIOD", "0",
                      "SOLVER.LOG_PERIOD", "3", "DATALOADER.SENTENCES_PER_VIDEO", "2", "SOLVER.ONLY_IOU", "1",
                      "--skip-test")


def test_sigterm_mid_epoch_then_resume_ends_with_the_uninterrupted_weights(synthetic_root, tmp_path):
    """Sampled sentences, batch-norm statistics and the late loss weights all resume exactly."""
    straight = tmp_path / "straight"
    proc = run_tool("train_net", *resume_args(synthetic_root, straight), env=ONE_THREAD)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = tmp_path / "term"
    env = dict(os.environ, PYTHONUNBUFFERED="1", **ONE_THREAD)
    with open(f"{out}.console.txt", "w") as console:
        background = subprocess.Popen([sys.executable, os.path.join(REPO, "tools", "train_net.py"),
                                       *resume_args(synthetic_root, out)], env=env, stdout=console,
                                      stderr=subprocess.STDOUT, text=True, start_new_session=True)
    assert signal_after_record(out, background, epoch=2, it=3) == 128 + signal.SIGTERM
    proc = run_tool("train_net", *resume_args(synthetic_root, out), env=ONE_THREAD)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "resuming epoch 2 after iteration" in proc.stderr + proc.stdout
    a = torch.load(straight / "model_final.pth", weights_only=False)["model"]
    b = torch.load(out / "model_final.pth", weights_only=False)["model"]
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name


def test_distilbert_is_frozen_for_freeze_bert_epochs_then_trains(synthetic_root, tmp_path):
    """MMN with a tiny DistilBERT written to a local folder: nothing is downloaded."""
    from tan.data import RunData
    from tan.data.text.words import tokenize
    cfg = load_config(MMN_SYNTHETIC, ["DATASETS.ROOT", synthetic_root])
    words = {w for q in RunData(cfg).queries("synthetic_train")[0] for w in tokenize(q.sentence)}
    folder = write_tiny_distilbert(str(tmp_path / "bert"), sorted(words)[:40])  # others are [UNK]
    out = tmp_path / "bert_run"
    proc = run_main("train_net", *train_args(synthetic_root, out, "MODEL.MMN.TEXT_ENCODER.NAME", "BERT",
                                             "MODEL.MMN.TEXT_ENCODER.BERT.PRETRAINED", folder,
                                             "SOLVER.FREEZE_BERT", "1", "SOLVER.MAX_EPOCH", "2",
                                             "SOLVER.ITERS_PER_EPOCH", "4", "SOLVER.TEST_PERIOD", "0"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    from transformers import DistilBertModel
    initial = {f"text_encoder.bert.{k}": v for k, v in DistilBertModel.from_pretrained(folder).state_dict().items()}
    first = torch.load(out / "model_1e.pth", weights_only=False)
    second = torch.load(out / "model_2e.pth", weights_only=False)["model"]
    for name, value in initial.items():
        assert torch.equal(first["model"][name], value), name  # frozen in epoch 1
    assert any(not torch.equal(second[name], value) for name, value in initial.items())  # trained in epoch 2
    assert not torch.equal(first["model"]["text_encoder.fc_out1.weight"], second["text_encoder.fc_out1.weight"])
    groups = first["optimizer"]["param_groups"]
    assert [g["name"] for g in groups] == ["base", "bert"] and groups[1]["lr"] == pytest.approx(groups[0]["lr"] * 0.1)
    assert metrics(out / "inference" / "model_final")["num_queries"] == 602


@pytest.mark.parametrize("opts", [("SOLVER.AMP", "bf16"), ("MODEL.CHANNELS_LAST", "True"),
                                  ("MODEL.MMN.FEAT2D.NAME", "conv")])
def test_mmn_options_train(synthetic_root, tmp_path, opts):
    out = tmp_path / "opt"
    proc = run_main("train_net", *train_args(synthetic_root, out, "SOLVER.MAX_EPOCH", "1", "SOLVER.ITERS_PER_EPOCH",
                                             "5", "SOLVER.TEST_PERIOD", "0", *opts))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert metrics(out / "inference" / "model_final")["num_queries"] == 602


def test_compiled_mmn_trains(synthetic_root, tmp_path):
    out = tmp_path / "compiled"
    # --skip-test: evaluating a compiled model is tested with 2D-TAN (tests/test_performance.py); compiling
    # the evaluation's shapes too would double this test's time
    proc = run_main("train_net", *train_args(synthetic_root, out, "SOLVER.COMPILE", "True", "SOLVER.MAX_EPOCH", "1",
                                             "SOLVER.ITERS_PER_EPOCH", "3", "SOLVER.TEST_PERIOD", "0"), "--skip-test",
                    timeout=900)
    if proc.returncode and ("CppCompileError" in proc.stderr or "InvalidCxxCompiler" in proc.stderr):
        pytest.skip("torch.compile cannot build kernels on this machine (no working C++ compiler)")
    assert proc.returncode == 0, proc.stderr[-3000:]
    names = torch.load(out / "model_final.pth", weights_only=False)["model"].keys()
    assert not any(n.startswith("_orig_mod") for n in names)


def test_a_distilbert_that_cannot_load_fails_before_anything_is_written(synthetic_root, tmp_path):
    out = tmp_path / "bad_bert"
    proc = run_main("train_net", *train_args(synthetic_root, out, "MODEL.MMN.TEXT_ENCODER.NAME", "BERT",
                                             "MODEL.MMN.TEXT_ENCODER.BERT.PRETRAINED", str(tmp_path / "missing")))
    assert proc.returncode == 2 and "MODEL.MMN.TEXT_ENCODER.BERT.PRETRAINED" in proc.stderr, proc.stderr[-2000:]
    assert not (out / "config.yml").exists()  # so the advice (another path, or LSTM) can be followed at once
