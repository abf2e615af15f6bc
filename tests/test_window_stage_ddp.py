"""The window stage (the relevance head and the cross-window losses) is part of the model's one forward,
so two processes under torchrun (gloo) train it beside any model, MMN with DistilBERT frozen in its
first epoch included, and a run killed mid-training resumes to the uninterrupted run's weights."""
import os
import signal
import subprocess
import sys

import pytest
import torch

from conftest import REPO
from runs import wait_for_training_record
from test_mmn import write_tiny_distilbert
from test_window_relevance import LONG, RANKED, long_root  # noqa: F401  (the fixture, shared)

pytestmark = pytest.mark.slow

MMN_SYNTHETIC = os.path.join(REPO, "configs", "mmn_synthetic.yaml")
TAN_SYNTHETIC = os.path.join(REPO, "configs", "2dtan_synthetic.yaml")


def run_args(config, long_root, out, *extra):
    root, catalog = long_root[:2]
    return ["--config-file", config, "DATASETS.ROOT", root, "DATASETS.CATALOG", catalog, *LONG, "OUTPUT_DIR",
            str(out), "MODEL.DEVICE", "cpu", "DATALOADER.NUM_WORKERS", "0", "SOLVER.MAX_EPOCH", "2",
            "SOLVER.TEST_PERIOD", "0", "SOLVER.CHECKPOINT_PERIOD", "1", "SOLVER.LOG_PERIOD", "1", "SEED", "5",
            "SOLVER.BATCH_SIZE", "2", *RANKED, *extra, "--skip-test"]


def torchrun_command(args):
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
            os.path.join(REPO, "tools", "train_net.py"), *args]


ENV = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")


def torchrun(args):
    proc = subprocess.run(torchrun_command(args), env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:]
    return proc.stdout


def killed_mid_epoch_2(args, out, console):
    """Start the run, SIGKILL torchrun and both workers at the first step epoch 2 logs (of 12)."""
    with open(console, "w") as f:
        proc = subprocess.Popen(torchrun_command(args), env=ENV, stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        wait_for_training_record(out, proc, 2, 0, timeout=600)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert not (out / "model_final.pth").exists()


def model_of(folder):
    return torch.load(folder / "model_final.pth", map_location="cpu", weights_only=False)["model"]


def model_settings(kind, tmp_path):
    if kind == "TAN":
        return TAN_SYNTHETIC, []
    words = ["person", "the", "a", "opens", "closes", "door", "walks", "sits"]
    folder = write_tiny_distilbert(str(tmp_path / "bert"), words)  # other words are [UNK]
    return MMN_SYNTHETIC, ["MODEL.MMN.TEXT_ENCODER.NAME", "BERT", "MODEL.MMN.TEXT_ENCODER.BERT.PRETRAINED", folder,
                           "SOLVER.FREEZE_BERT", "1"]


@pytest.mark.parametrize("kind", ["TAN", "MMN"])
def test_two_processes_train_the_window_stage_and_a_killed_run_resumes_to_the_same_weights(kind, long_root,
                                                                                           tmp_path):
    config, extra = model_settings(kind, tmp_path)
    straight = tmp_path / "straight"
    output = torchrun(run_args(config, long_root, straight, *extra))
    log = (straight / "log.txt").read_text()
    assert "using 2 process(es)" in log and "window_relevance" in log and "window_ranking" in log, output[-3000:]
    first, final = (torch.load(straight / name, map_location="cpu", weights_only=False)["model"]
                    for name in ("model_1e.pth", "model_final.pth"))
    head = [k for k in final if k.startswith("relevance.")]
    assert head and all(not torch.equal(first[k], final[k]) for k in head if k.endswith("weight"))  # it trains
    if kind == "MMN":  # DistilBERT frozen in epoch 1, trained in epoch 2, in the same forward as the head
        from transformers import DistilBertModel
        initial = DistilBertModel.from_pretrained(extra[3]).state_dict()
        assert all(torch.equal(first[f"text_encoder.bert.{k}"], v) for k, v in initial.items())
        assert any(not torch.equal(final[f"text_encoder.bert.{k}"], v) for k, v in initial.items())

    killed = tmp_path / "killed"
    args = run_args(config, long_root, killed, *extra)
    killed_mid_epoch_2(args, killed, tmp_path / "console.txt")
    torchrun(args)  # the same command: it resumes
    assert "resuming from" in (killed / "log.txt").read_text()
    ours, theirs = model_of(killed), model_of(straight)
    assert ours.keys() == theirs.keys()
    assert [k for k in ours if not torch.equal(ours[k], theirs[k])] == []
