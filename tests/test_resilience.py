"""Crashes, preemption and failed saves: nothing lost, and resumed runs end
with the weights of an uninterrupted one."""
import errno
import os
import random
import signal
import subprocess
import sys
import time

import pytest
import torch

from tan.config import load_config
from tan.errors import TanError
from tan.modeling import build_model
from tan.utils import io as tan_io
from tan.engine.checkpoints import Checkpointer

from conftest import ONE_THREAD, REPO, SYNTHETIC_CONFIG, run_tool
from runs import count_lines, signal_after_record, stop_process_group, wait_for_training_record

pytestmark = pytest.mark.slow

RUN = ["MODEL.DEVICE", "cpu", "DATALOADER.NUM_WORKERS", "0", "SOLVER.LOG_PERIOD", "4", "SOLVER.TEST_PERIOD", "0",
       "SOLVER.MAX_EPOCH", "3", "SOLVER.ITERS_PER_EPOCH", "12", "SOLVER.MILESTONES", "(2,)"]


def args(root, out):
    return ["--config-file", SYNTHETIC_CONFIG, "DATASETS.ROOT", root, "OUTPUT_DIR", str(out), *RUN, "--skip-test"]


def start(root, out):
    """The run in the background, its console output in a file beside OUTPUT_DIR
    (a pipe nobody reads while the test waits could fill up and stall it)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", **ONE_THREAD)
    console = open(f"{out}.console.txt", "a")
    proc = subprocess.Popen([sys.executable, os.path.join(REPO, "tools", "train_net.py"), *args(root, out)],
                            env=env, stdout=console, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    console.close()  # the child holds its own copy
    return proc


def console_output(out):
    with open(f"{out}.console.txt") as f:
        return f.read()


def final_weights(out):
    return torch.load(out / "model_final.pth", weights_only=False)["model"]


@pytest.fixture(scope="module")
def uninterrupted(synthetic_root, tmp_path_factory):
    out = tmp_path_factory.mktemp("straight") / "out"
    proc = run_tool("train_net", *args(synthetic_root, out), env=ONE_THREAD)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return final_weights(out)


def assert_same_weights(a, b):
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name


def test_killed_at_random_points_and_resumed_ends_with_the_uninterrupted_weights(synthetic_root, uninterrupted,
                                                                                   tmp_path):
    """SIGKILL (nothing can be saved): once during start-up, then once in each
    epoch at a random moment after a random logged iteration, so that steps,
    epoch ends and saves can be hit, and the machine's speed does not decide
    how many kills land."""
    out = tmp_path / "killed"
    rng = random.Random(0)
    proc = start(synthetic_root, out)
    time.sleep(rng.uniform(0.2, 1.5))
    stop_process_group(proc)
    for epoch in (1, 2, 3):
        before = count_lines(out / "metrics.jsonl")
        proc = start(synthetic_root, out)
        try:
            wait_for_training_record(out, proc, epoch, rng.choice([4, 8]), skip_lines=before)
            time.sleep(rng.uniform(0.0, 0.5))
        finally:
            stop_process_group(proc)  # SIGKILL
    finished = (out / "model_final.pth").is_file()  # the last kill may come after the run's end on a fast machine
    proc = run_tool("train_net", *args(synthetic_root, out), env=ONE_THREAD)
    assert proc.returncode == 0, proc.stdout[-3000:]
    if finished:
        assert "holds all 3 epochs: nothing to train" in proc.stdout
    else:
        assert "took over the lock of pid" in proc.stdout  # the killed run could not remove run.lock
    # every run killed while it trained left its lock, and the next one took it over: the restarts after
    # the kills in epochs 1 and 2 at least (the start-up kill may come before the lock is taken)
    takeovers = (out / "log.txt").read_text().count("took over the lock of pid")
    assert takeovers >= 2 + (not finished), takeovers
    assert_same_weights(final_weights(out), uninterrupted)
    assert not [n for n in os.listdir(out) if n.endswith(".tmp") or n == "run.lock"]


def test_sigterm_mid_epoch_saves_and_the_restart_ends_with_the_uninterrupted_weights(synthetic_root, uninterrupted,
                                                                                      tmp_path):
    out = tmp_path / "term"
    code = signal_after_record(out, start(synthetic_root, out), epoch=2, it=4)
    output = console_output(out)
    assert code == 128 + signal.SIGTERM, output[-3000:]
    assert "interrupted by SIGTERM in epoch 2" in output
    saved = [n for n in os.listdir(out) if n.startswith("model_2e_")]
    assert len(saved) == 1 and (out / "last_checkpoint").read_text() == saved[0]
    assert not (out / "run.lock").exists()  # released on the way out
    proc = run_tool("train_net", *args(synthetic_root, out), env=ONE_THREAD)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "resuming epoch 2 after iteration" in proc.stdout
    assert_same_weights(final_weights(out), uninterrupted)


def test_a_save_failing_half_way_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    cfg = load_config(SYNTHETIC_CONFIG)
    model = build_model(cfg)
    checkpointer = Checkpointer(model, save_dir=str(tmp_path))
    checkpointer.save("model_1e", epoch=2)
    good = (tmp_path / "model_1e.pth").read_bytes()

    def disk_full(obj, f):
        f.write(b"\0" * 1000)  # part of the file, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", disk_full)
    with pytest.raises(TanError, match=r"cannot write checkpoint .*model_2e.pth \(No space left on device\); "
                                       r"the previous checkpoint .*model_1e.pth is intact"):
        checkpointer.save("model_2e", epoch=3)
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path)) == ["last_checkpoint", "model_1e.pth"]  # no partial file left
    assert (tmp_path / "last_checkpoint").read_text() == "model_1e.pth"
    assert (tmp_path / "model_1e.pth").read_bytes() == good
    assert Checkpointer(build_model(cfg), save_dir=str(tmp_path)).load()["epoch"] == 2


def test_a_truncated_latest_checkpoint_falls_back_to_the_newest_valid_one(tmp_path, caplog):
    cfg = load_config(SYNTHETIC_CONFIG)
    checkpointer = Checkpointer(build_model(cfg), save_dir=str(tmp_path))
    checkpointer.save("model_1e", epoch=2)
    time.sleep(0.01)
    checkpointer.save("model_2e", epoch=3)
    data = (tmp_path / "model_2e.pth").read_bytes()
    (tmp_path / "model_2e.pth").write_bytes(data[: len(data) // 2])
    arguments = Checkpointer(build_model(cfg), save_dir=str(tmp_path)).load()
    assert arguments["epoch"] == 2
    assert "model_2e.pth" in caplog.text and "falling back" in caplog.text


def test_no_readable_checkpoint_is_an_error_not_a_silent_fresh_start(tmp_path):
    cfg = load_config(SYNTHETIC_CONFIG)
    Checkpointer(build_model(cfg), save_dir=str(tmp_path)).save("model_1e", epoch=2)
    (tmp_path / "model_1e.pth").write_bytes(b"garbage")
    with pytest.raises(TanError, match="model_1e.pth.*cannot be read.*no other checkpoint"):
        Checkpointer(build_model(cfg), save_dir=str(tmp_path)).load()


def test_atomic_write_keeps_the_old_file_when_writing_fails(tmp_path):
    path = tmp_path / "model.pth"
    tan_io.atomic_torch_save({"w": torch.zeros(3)}, str(path))

    class Unpicklable:
        def __reduce__(self):
            raise OSError(errno.EIO, "I/O error")

    with pytest.raises(OSError):
        tan_io.atomic_torch_save({"w": torch.ones(3), "bad": Unpicklable()}, str(path))  # fails half-way
    assert torch.equal(torch.load(path)["w"], torch.zeros(3)) and os.listdir(tmp_path) == ["model.pth"]
