"""A resumed run's records are an uninterrupted run's: kills during the validations, mid-epoch and
around a user's hook leave metrics.jsonl, the validation records, model_best.pth and a hook's own
record file as one run without stops writes them."""
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch

from tan.utils.events import tensorboard_available

from conftest import ONE_THREAD, REPO, SYNTHETIC_CONFIG, run_tool
from runs import count_lines, stop_process_group, wait_for_training_record

pytestmark = pytest.mark.slow

EPOCHS = 4
RUN = ["MODEL.DEVICE", "cpu", "DATALOADER.NUM_WORKERS", "0", "SOLVER.LOG_PERIOD", "2", "SOLVER.TEST_PERIOD", "1",
       "SOLVER.CHECKPOINT_PERIOD", "1", "SOLVER.MAX_EPOCH", str(EPOCHS), "SOLVER.ITERS_PER_EPOCH", "4",
       "SOLVER.MILESTONES", "(3,)", "TENSORBOARD", "False"]
TIMINGS = ("time", "data_time", "eta_seconds")  # how long things took: no two runs agree on them


def args(root, out, *extra):
    """The run's command line; ``extra`` KEY VALUE pairs replace those of RUN."""
    run = dict(zip(RUN[::2], RUN[1::2]))
    run.update(zip(extra[::2], extra[1::2]))
    return ["--config-file", SYNTHETIC_CONFIG, "DATASETS.ROOT", root, "OUTPUT_DIR", str(out),
            *(item for pair in run.items() for item in pair), "--skip-test"]


def start(root, out, *extra):
    env = dict(os.environ, PYTHONUNBUFFERED="1", **ONE_THREAD)
    with open(f"{out}.console.txt", "a") as console:
        return subprocess.Popen([sys.executable, os.path.join(REPO, "tools", "train_net.py"), *args(root, out, *extra)],
                                env=env, stdout=console, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def records(out, name="metrics.jsonl"):
    with open(out / name) as f:
        return [{k: v for k, v in json.loads(line).items() if k not in TIMINGS} for line in f]


def validations(out):
    return [r for r in records(out) if "dataset" in r]


def best(out):
    saved = torch.load(out / "model_best.pth", weights_only=False)
    return saved["best"], saved["model"]


def assert_same_run(out, straight):
    assert records(out) == records(straight)
    assert [r["epoch"] for r in validations(out)] == list(range(1, EPOCHS + 1))
    (info, weights), (straight_info, straight_weights) = best(out), best(straight)
    assert info == straight_info
    assert weights.keys() == straight_weights.keys()
    assert all(torch.equal(weights[k], straight_weights[k]) for k in weights)


def wait_for(predicate, proc, what, timeout=300):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return time.monotonic()
        if proc.poll() is not None:
            raise AssertionError(f"the run ended (exit {proc.returncode}) before {what}")
        time.sleep(0.01)
    raise AssertionError(f"no {what} after {timeout} s")


def saved_epoch(out, epoch):
    return lambda: (out / "last_checkpoint").is_file() and (out / "last_checkpoint").read_text() == f"model_{epoch}e.pth"


def validated(out, epoch):
    return lambda: (out / "metrics.jsonl").is_file() and any(
        '"dataset"' in line and json.loads(line)["epoch"] == epoch for line in open(out / "metrics.jsonl")
        if line.endswith("\n"))


@pytest.fixture(scope="module")
def straight(synthetic_root, tmp_path_factory):
    """The uninterrupted run, watched: how long each validation takes after its epoch's checkpoint."""
    out = tmp_path_factory.mktemp("straight") / "out"
    proc = start(synthetic_root, out)
    durations = []
    try:
        for epoch in range(1, EPOCHS + 1):
            saved = wait_for(saved_epoch(out, epoch), proc, f"the checkpoint of epoch {epoch}")
            durations.append(wait_for(validated(out, epoch), proc, f"the validation of epoch {epoch}") - saved)
        assert proc.wait(timeout=300) == 0, open(f"{out}.console.txt").read()[-3000:]
    finally:
        stop_process_group(proc)
    return out, min(durations)


def test_a_kill_in_each_validation_resumes_to_the_uninterrupted_records_and_best_model(synthetic_root, straight,
                                                                                       tmp_path):
    """SIGKILL at a random moment of each epoch's validation (after the epoch's checkpoint, before its
    record), then the same command: the resumed runs validate each epoch once, and the folder ends
    with the uninterrupted run's metrics.jsonl, validation records and model_best.pth."""
    straight_out, validation_seconds = straight
    out = tmp_path / "killed"
    rng = random.Random(0)
    for epoch in range(1, EPOCHS + 1):
        proc = start(synthetic_root, out)
        try:
            wait_for(saved_epoch(out, epoch), proc, f"the checkpoint of epoch {epoch}")
            time.sleep(rng.uniform(0.0, 0.8) * validation_seconds)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        finally:
            stop_process_group(proc)
        assert not validated(out, epoch)(), f"the kill came after epoch {epoch}'s validation"
    proc = run_tool("train_net", *args(synthetic_root, out), env=ONE_THREAD)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert (f"the checkpoint of epoch {EPOCHS} was saved before the epoch's hooks (its validation among them) ran: "
            f"running them now") in proc.stdout
    assert_same_run(out, straight_out)


def test_a_kill_mid_epoch_and_a_stop_after_a_validation_write_each_record_once(synthetic_root, straight, tmp_path):
    """SIGKILL after a logged step of epoch 2 (the steps after epoch 1's checkpoint are trained again),
    then SIGTERM once epoch 3's validation is recorded (the checkpoint then says its hooks ran, so
    the resumed run does not validate epoch 3 again): metrics.jsonl as the uninterrupted run's."""
    straight_out, _ = straight
    out = tmp_path / "killed"
    board = ["TENSORBOARD", str(tensorboard_available())]
    proc = start(synthetic_root, out, *board)
    try:
        wait_for_training_record(out, proc, 2, 2)
    finally:
        stop_process_group(proc)
    assert any(r.get("epoch") == 2 and r.get("iter") == 2 for r in records(out))  # to be taken back
    proc = start(synthetic_root, out, *board)
    try:
        wait_for(validated(out, 3), proc, "the validation of epoch 3")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=300) == 128 + signal.SIGTERM
    finally:
        stop_process_group(proc)
    proc = run_tool("train_net", *args(synthetic_root, out, *board), env=ONE_THREAD)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "running them" not in proc.stdout
    assert_same_run(out, straight_out)
    if tensorboard_available():  # TensorBoard shows each step and each validation once too
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
        steps = EventAccumulator(str(out / "tensorboard"))
        steps.Reload()
        logged = [r for r in records(straight_out) if "iteration" in r]
        assert [(e.step, round(e.value, 5)) for e in steps.Scalars("train/loss")] == [
            (r["iteration"], round(r["loss"], 5)) for r in logged]
        epochs = EventAccumulator(str(out / "tensorboard" / "val"))
        epochs.Reload()
        assert [e.step for e in epochs.Scalars("val/synthetic_val/R@1,IoU@0.5")] == list(range(1, EPOCHS + 1))


KILL_PLUGIN = os.path.join(REPO, "tests", "plugins", "kill_at_save.py")
SAVE_POINTS = ("start", "written", "renamed", "marker_written", "marker_renamed")  # the plug-in's, in order
# every point of a middle epoch's save; the final save cut after its rename; the first save (no
# last_checkpoint yet) cut after its rename
KILLS = [("model_2e.pth", point) for point in SAVE_POINTS] + [
    ("model_final.pth", "renamed"), ("model_final.pth", "marker_written"), ("model_1e.pth", "renamed")]
PREVIOUS = {"model_1e.pth": None, "model_2e.pth": "model_1e.pth", "model_final.pth": f"model_{EPOCHS}e.pth"}


def final_weights(out):
    return torch.load(out / "model_final.pth", weights_only=False)["model"]


@pytest.mark.parametrize("target,point", KILLS, ids=[f"{t[:-4]}-{p}" for t, p in KILLS])
def test_a_kill_at_any_point_of_a_save_resumes_to_the_uninterrupted_run(synthetic_root, straight, tmp_path, target,
                                                                        point):
    """SIGKILL at each point of a checkpoint's save (its temporary file begun, whole, renamed into place;
    last_checkpoint's temporary file whole, renamed), then the same command: the run ends with the
    uninterrupted run's weights, records and best model. A checkpoint in place that last_checkpoint
    does not name yet is the one resumed from, and the log says so."""
    straight_out, _ = straight
    out = tmp_path / "killed"
    plugin = ("PLUGINS", f"('{KILL_PLUGIN}',)")
    proc = run_tool("train_net", *args(synthetic_root, out, *plugin),
                    env={**ONE_THREAD, "TAN_TEST_KILL_AT": f"{target}:{point}"})
    assert proc.returncode == -signal.SIGKILL, proc.stdout[-3000:] + proc.stderr[-3000:]
    in_place = SAVE_POINTS.index(point) >= SAVE_POINTS.index("renamed")
    named = target if point == "marker_renamed" else PREVIOUS[target]
    assert (out / target).is_file() == in_place
    marker = out / "last_checkpoint"
    assert (marker.read_text() if marker.is_file() else None) == named
    proc = run_tool("train_net", *args(synthetic_root, out, *plugin), env=ONE_THREAD)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    cut_short = f"{marker} names {named}, but {target} was saved after it, whole, by a save stopped before it " \
                f"could update last_checkpoint: taking {target}"
    assert (cut_short in proc.stdout) == (in_place and named != target and named is not None)
    if point == "start":
        assert "removed 1 half-written file(s) of that run" in proc.stdout
    assert not [n for n in os.listdir(out) if n.endswith(".tmp")]
    assert marker.read_text() == "model_final.pth"
    assert_same_run(out, straight_out)
    ours, theirs = final_weights(out), final_weights(straight_out)
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)


HOOK_PLUGIN = textwrap.dedent('''
    """A trainer whose hook writes a line per epoch through the run's records (docs/training.md)."""
    from tan.engine import HookBase, Trainer, register_trainer
    from tan.utils import comm


    class EpochLines(HookBase):
        def after_epoch(self, state, epoch):
            if comm.is_main_process():
                lr = self.trainer.optimizer.param_groups[0]["lr"]
                self.trainer.records.write({"epoch": epoch, "lr": lr, "iteration": state.iteration},
                                           "epoch_lines.jsonl")


    @register_trainer("EPOCH_LINES")
    class EpochLinesTrainer(Trainer):
        def build_hooks(self):
            hooks = super().build_hooks()
            hooks.insert(-1, EpochLines())
            return hooks
''')


def test_a_hook_writing_through_the_records_writes_each_epoch_once_across_kills(synthetic_root, tmp_path):
    """A user's hook writes a line per epoch with trainer.records; SIGKILL right after epoch 2's
    checkpoint and again after epoch 3's line: the file has one line per epoch, in order."""
    plugin = tmp_path / "epoch_lines_plugin.py"
    plugin.write_text(HOOK_PLUGIN)
    extra = ["PLUGINS", f"('{plugin}',)", "TRAINER", "EPOCH_LINES", "SOLVER.TEST_PERIOD", "0"]
    out = tmp_path / "hooked"
    proc = start(synthetic_root, out, *extra)
    try:
        wait_for(saved_epoch(out, 2), proc, "the checkpoint of epoch 2")
    finally:
        stop_process_group(proc)
    proc = start(synthetic_root, out, *extra)
    try:
        wait_for(lambda: count_lines(out / "epoch_lines.jsonl") >= 3, proc, "epoch 3's line")
    finally:
        stop_process_group(proc)
    proc = run_tool("train_net", *args(synthetic_root, out, *extra), env=ONE_THREAD)
    assert proc.returncode == 0, proc.stdout[-3000:]
    lines = records(out, "epoch_lines.jsonl")
    assert [line["epoch"] for line in lines] == list(range(1, EPOCHS + 1))
    assert [line["iteration"] for line in lines] == [4 * epoch for epoch in range(1, EPOCHS + 1)]
    assert lines[-1]["lr"] == pytest.approx(lines[0]["lr"] * 0.1)  # the rate after the milestone at epoch 3
