"""A run folder never lies: one training run per OUTPUT_DIR, its config.yml is
what the checkpoints were trained with (changes refused, or accepted and
recorded), and a write that fails ends with exit 2 and leaves the last good state."""
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch

from tan.engine.run_folder import read_history
from tan.errors import TanError
from tan.utils.io import clear_abandoned_temporaries
from tan.utils.run_lock import RunLock

from conftest import ONE_THREAD, REPO, SYNTHETIC_CONFIG, file_size_limit, run_main, with_overrides
from runs import signal_after_record, stop_process_group, wait_for_training_record

pytestmark = pytest.mark.slow

RUN = ["MODEL.DEVICE", "cpu", "DATALOADER.NUM_WORKERS", "0", "SOLVER.LOG_PERIOD", "2", "SOLVER.TEST_PERIOD", "0",
       "SOLVER.ITERS_PER_EPOCH", "6", "SOLVER.MILESTONES", "(2,)"]


def train_args(root, out, *extra, epochs=2):
    return ["--config-file", SYNTHETIC_CONFIG, "--skip-test",
            *with_overrides(["DATASETS.ROOT", root, "OUTPUT_DIR", str(out), *RUN, "SOLVER.MAX_EPOCH", str(epochs)],
                            *extra)]


def train(root, out, *extra, epochs=2):
    return run_main("train_net", *train_args(root, out, *extra, epochs=epochs), env=ONE_THREAD)


def start(root, out, *extra, epochs=2, console=None):
    env = dict(os.environ, PYTHONUNBUFFERED="1", **ONE_THREAD)
    with open(console or f"{out}.console.txt", "a") as f:
        return subprocess.Popen([sys.executable, os.path.join(REPO, "tools", "train_net.py"),
                                 *train_args(root, out, *extra, epochs=epochs)],
                                env=env, stdout=f, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def snapshot(folder):
    """{name: bytes} of every file under ``folder``: what a refused run must leave as it was."""
    files = {}
    for base, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(base, name)
            with open(path, "rb") as f:
                files[os.path.relpath(path, folder)] = f.read()
    return files


def weights(path):
    return torch.load(path, weights_only=False)["model"]


def assert_same_weights(a, b):
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name


def records(out):
    with open(os.path.join(out, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


@pytest.fixture(scope="module")
def two_epochs(synthetic_root, tmp_path_factory):
    """A finished 2-epoch run, copied by the tests that change it."""
    out = tmp_path_factory.mktemp("finished") / "out"
    proc = train(synthetic_root, out)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return out


def copy_of(folder, tmp_path):
    target = tmp_path / "run"
    shutil.copytree(folder, target)
    return target


# --- one run per folder -------------------------------------------------------------------------------------


def test_a_second_training_on_a_busy_folder_is_refused_at_once_and_the_first_is_untouched(synthetic_root, tmp_path):
    out = tmp_path / "busy"
    long_epochs = ["SOLVER.ITERS_PER_EPOCH", "30"]  # the first run is still training when the second starts
    first = start(synthetic_root, out, *long_epochs, epochs=3)
    try:
        wait_for_training_record(out, first, epoch=1, it=2)
        holder = json.loads((out / "run.lock").read_text())
        assert holder["pid"] == first.pid
        before = time.monotonic()
        second = train(synthetic_root, out, *long_epochs, epochs=3)
        took = time.monotonic() - before
        first.wait(timeout=300)
    finally:
        stop_process_group(first)
    assert second.returncode == 2, second.stdout[-2000:] + second.stderr[-2000:]
    message = second.stderr.strip()
    assert "Traceback" not in message and len(message.splitlines()) == 1
    assert f"OUTPUT_DIR '{out}' is in use by another run: pid {first.pid} on host" in message
    assert took < 30  # start-up and the data checks, no training
    assert first.returncode == 0
    log = (out / "log.txt").read_text()
    assert log.count("start training") == 1 and "in use by another run" not in log
    steps = [(r["epoch"], r["iter"]) for r in records(out)]
    assert steps == [(e, i) for e in (1, 2, 3) for i in range(2, 31, 2)]  # one run's records, none twice
    assert len(read_history(out)) == 1
    assert not (out / "run.lock").exists()  # released at the end


def test_the_lock_of_a_killed_run_is_taken_over(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from tan.utils.run_lock import RunLock; RunLock(sys.argv[1]).acquire(); "
        "print('locked', flush=True); time.sleep(600)"), str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(TanError, match=f"is in use by another run: pid {holder.pid} on host"):
            RunLock(str(tmp_path)).acquire()
        holder.kill()
        holder.wait()
        assert (tmp_path / "run.lock").exists()  # left behind by the killed holder
        lock = RunLock(str(tmp_path)).acquire()
        assert lock.taken_over["pid"] == holder.pid
        assert json.loads((tmp_path / "run.lock").read_text())["pid"] == os.getpid()
        lock.release()
        assert not (tmp_path / "run.lock").exists()
    finally:
        holder.kill()
        holder.stdout.close()


def test_only_temporaries_of_writers_that_are_gone_are_removed(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], stdout=subprocess.PIPE,
                          text=True).stdout.strip()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        names = [f".model_2e.pth.{dead}.abc123.tmp", f".model_3e.pth.{live.pid}.def456.tmp",
                 ".model_1e.pth.xyz789.tmp", "notes.tmp", "model_1e.pth"]
        for name in names:
            (tmp_path / name).write_text("x")
        removed = [entry for entry, _ in clear_abandoned_temporaries(str(tmp_path), unknown_writers=True)]
        assert removed == sorted([f".model_2e.pth.{dead}.abc123.tmp", ".model_1e.pth.xyz789.tmp"])
        assert sorted(os.listdir(tmp_path)) == sorted([f".model_3e.pth.{live.pid}.def456.tmp", "notes.tmp",
                                                       "model_1e.pth"])
    finally:
        live.kill()
        live.wait()


def gone_pid():
    return subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], stdout=subprocess.PIPE,
                          text=True).stdout.strip()


def test_the_abandoned_copies_of_a_destination_are_cleared_and_nothing_else(tmp_path):
    """What a writer killed outright leaves beside DST: temporary files and folders (the
    current names, older ones, a folder swap's ".old"); a live writer's are kept, and so are
    another host's, whose pid says nothing here."""
    from tan.utils import io as tan_io

    dead, host = gone_pid(), tan_io.HOST_TAG
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        gone = [f".dst.hdf5.{dead}-{host}.k3j2.tmp", f".dst.hdf5.{dead}.old1.tmp", f"dst.hdf5.{dead}.tmp",
                f".dst.{dead}-{host}.ab12.tmp"]
        kept = [f".dst.hdf5.{live.pid}-{host}.x9y8.tmp", f".dst.hdf5.{dead}-0badcafe.r5t6.tmp",
                ".dst.hdf5.nopid.tmp", "dst.hdf5", "dst", "other.hdf5", f".other.hdf5.{dead}-{host}.q1w2.tmp"]
        for name in gone + kept:
            if name.startswith(".dst.") and ".hdf5" not in name or name == "dst":
                (tmp_path / name).mkdir()
                (tmp_path / name / "v.npy").write_text("x")
            else:
                (tmp_path / name).write_text("x")
        done = tan_io.clear_abandoned_temporaries_of(str(tmp_path / "dst.hdf5")) + \
            tan_io.clear_abandoned_temporaries_of(str(tmp_path / "dst"))
        assert sorted(done) == sorted(f"removed {tmp_path / n}" for n in gone)
        assert sorted(os.listdir(tmp_path)) == sorted(kept)
    finally:
        live.kill()
        live.wait()


def test_a_folder_moved_aside_by_a_killed_swap_is_put_back(tmp_path):
    """Killed between the swap's two renames: DST is gone, the old one is ".DST....tmp.old" and the
    new one ".DST....tmp". The old one comes back, as for any conversion that did not finish."""
    from tan.utils import io as tan_io

    dead, host = gone_pid(), tan_io.HOST_TAG
    new, old = tmp_path / f".dst.{dead}-{host}.ab12.tmp", tmp_path / f".dst.{dead}-{host}.ab12.tmp.old"
    for folder, content in ((new, "new"), (old, "old")):
        folder.mkdir()
        (folder / "v.npy").write_text(content)
    done = tan_io.clear_abandoned_temporaries_of(str(tmp_path / "dst"))
    assert sorted(done) == sorted([f"removed {new}", f"put {old} back as {tmp_path / 'dst'}"])
    assert os.listdir(tmp_path) == ["dst"] and (tmp_path / "dst" / "v.npy").read_text() == "old"


def test_the_first_write_into_a_folder_clears_what_gone_writers_left_there(tmp_path):
    from tan.utils import io as tan_io

    dead, host = gone_pid(), tan_io.HOST_TAG
    left = [f".metrics.json.{dead}-{host}.a1.tmp", f".predictions.jsonl.{dead}.b2.tmp"]
    kept = [f".metrics.json.{dead}-0badcafe.c3.tmp", f".metrics.json.{os.getpid()}-{host}.d4.tmp"]
    for name in left + kept:
        (tmp_path / name).write_text("x")
    tan_io.atomic_write_text(str(tmp_path / "metrics.json"), "{}\n")
    assert sorted(os.listdir(tmp_path)) == sorted(kept + ["metrics.json"])


# --- the folder's config is the truth ------------------------------------------------------------------------


class Killed(BaseException):
    """Stands for a SIGKILL between two writes: nothing after it runs."""


def test_a_kill_between_the_history_and_config_yml_is_completed_once_by_the_same_command(tmp_path, monkeypatch):
    """config_history.jsonl is written before config.yml: cut between the two, a start (or a change)
    leaves config.yml as it was, and writing the same record again completes config.yml without a
    second history line. (The other order left a config.yml whose change no history line records.)"""
    from tan.config import load_config
    from tan.engine import run_folder

    cfg = load_config(SYNTHETIC_CONFIG, ["OUTPUT_DIR", str(tmp_path)])
    changed = load_config(SYNTHETIC_CONFIG, ["OUTPUT_DIR", str(tmp_path), "SOLVER.LR", "0.5"])
    saving = run_folder.save_config
    for config in (cfg, changed):
        record = (run_folder.start_record(cfg) if config is cfg else
                  run_folder.change_record(run_folder.folder_changes(changed), 2))

        def killed(*_):
            raise Killed
        monkeypatch.setattr(run_folder, "save_config", killed)
        with pytest.raises(Killed):
            run_folder.commit_config(config, record)
        assert len(read_history(tmp_path)) == (1 if config is cfg else 2)
        yml = tmp_path / "config.yml"  # as it was: none at the start, the old rate at the change
        assert not yml.is_file() if config is cfg else "LR: 0.5" not in yml.read_text()
        monkeypatch.setattr(run_folder, "save_config", saving)
        run_folder.commit_config(config, dict(record, time="later"))
        assert len(read_history(tmp_path)) == (1 if config is cfg else 2)
    assert read_history(tmp_path)[-1]["changes"] == {"SOLVER.LR": [0.001, 0.5]}
    assert "LR: 0.5" in (tmp_path / "config.yml").read_text()


def test_a_changed_learning_rate_is_refused_and_nothing_is_written(synthetic_root, two_epochs, tmp_path):
    out = copy_of(two_epochs, tmp_path)
    before = snapshot(out)
    proc = train(synthetic_root, out, "SOLVER.LR", "0.5")
    assert proc.returncode == 2
    assert "SOLVER.LR: 0.001 -> 0.5" in proc.stderr and "--accept-config-changes" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert snapshot(out) == before  # config.yml byte-identical, and everything else


def test_a_model_change_the_checkpoint_cannot_take_leaves_the_folder_as_it_was(synthetic_root, two_epochs, tmp_path):
    out = copy_of(two_epochs, tmp_path)
    before = snapshot(out)
    proc = train(synthetic_root, out, "MODEL.TAN.PREDICTOR.HIDDEN_SIZE", "32", "SOLVER.MAX_EPOCH", "3",
                 "--accept-config-changes")
    assert proc.returncode == 2
    assert "does not fit the configured model (shape mismatch" in proc.stdout + proc.stderr
    after = snapshot(out)
    assert after.pop("log.txt").startswith(before.pop("log.txt"))  # the log tells what happened
    assert after == before


def test_max_epoch_cannot_undo_trained_epochs(synthetic_root, two_epochs, tmp_path):
    out = copy_of(two_epochs, tmp_path)
    before = snapshot(out)
    proc = train(synthetic_root, out, "--accept-config-changes", epochs=1)
    assert proc.returncode == 2 and "has trained 2 epochs; SOLVER.MAX_EPOCH 1 cannot undo that" in proc.stdout
    after = snapshot(out)
    after.pop("log.txt"), before.pop("log.txt")
    assert after == before


def test_runtime_settings_may_change_with_a_log_line(synthetic_root, two_epochs, tmp_path):
    out = copy_of(two_epochs, tmp_path)
    proc = train(synthetic_root, out, "SOLVER.LOG_PERIOD", "3", "TEST.BATCH_SIZE", "16")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "config change that does not alter results: SOLVER.LOG_PERIOD: 2 -> 3" in proc.stdout
    assert "nothing to train" in proc.stdout
    assert "LOG_PERIOD: 3" in (out / "config.yml").read_text()
    last = read_history(out)[-1]
    assert last["changes"] == {"OUTPUT_DIR": [str(two_epochs), str(out)],  # the folder was copied
                               "SOLVER.LOG_PERIOD": [2, 3], "TEST.BATCH_SIZE": [64, 16]}
    assert last["from_epoch"] == 3 and last["reason"] == "runtime settings"


def test_continuing_a_finished_run_gives_the_weights_of_one_longer_run(synthetic_root, two_epochs, tmp_path):
    out = copy_of(two_epochs, tmp_path)
    proc = train(synthetic_root, out, "--accept-config-changes", epochs=3)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "config change accepted (--accept-config-changes): SOLVER.MAX_EPOCH: 2 -> 3" in proc.stdout
    straight = tmp_path / "straight"
    assert train(synthetic_root, straight, epochs=3).returncode == 0
    assert_same_weights(weights(out / "model_final.pth"), weights(straight / "model_final.pth"))
    assert [(r["epoch"], r["iter"]) for r in records(out)] == [(e, i) for e in (1, 2, 3) for i in (2, 4, 6)]
    start_record, change = read_history(out)
    assert start_record["event"] == "start" and start_record["config"]["SOLVER.MAX_EPOCH"] == 2
    assert change["from_epoch"] == 3
    assert change["changes"] == {"OUTPUT_DIR": [str(two_epochs), str(out)], "SOLVER.MAX_EPOCH": [2, 3]}
    assert "MAX_EPOCH: 3" in (out / "config.yml").read_text()


def test_an_accepted_learning_rate_applies_to_the_resumed_run(synthetic_root, tmp_path):
    """Stopped mid-epoch 2 (SIGTERM), resumed with another SOLVER.LR: the rest of
    epoch 2 trains at the new rate, epoch 3 at a tenth of it (milestone 2)."""
    out = tmp_path / "lr"
    assert signal_after_record(out, start(synthetic_root, out, epochs=3), epoch=2, it=2) == 128 + signal.SIGTERM
    stopped_at = int(re.fullmatch(r"model_2e_(\d+)it\.pth", (out / "last_checkpoint").read_text()).group(1))
    done = len(records(out))
    before = snapshot(out)
    # Changes the resumed run cannot take fail before config.yml or its history say they hold:
    # an epoch now shorter than the point it stopped at; an end before the epoch it began.
    shorter = train(synthetic_root, out, "SOLVER.ITERS_PER_EPOCH", "1", "--accept-config-changes", epochs=3)
    assert shorter.returncode == 2 and "resume with the settings the run started with" in shorter.stdout
    ended = train(synthetic_root, out, "--accept-config-changes", epochs=1)
    assert ended.returncode == 2
    assert f"has trained 1 epochs and {stopped_at} steps of epoch 2; SOLVER.MAX_EPOCH 1 cannot undo" in ended.stdout
    after = snapshot(out)
    assert after.pop("log.txt").startswith(before.pop("log.txt")) and after == before
    resumed = train(synthetic_root, out, "SOLVER.LR", "0.01", "--accept-config-changes", epochs=3)
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    assert "SOLVER.LR: 0.001 -> 0.01" in resumed.stdout
    later = records(out)[done:]
    epoch2 = [r["lr"] for r in later if r["epoch"] == 2]
    epoch3 = [r["lr"] for r in later if r["epoch"] == 3]
    assert epoch2 and epoch2 == pytest.approx([0.01] * len(epoch2))
    assert epoch3 == pytest.approx([0.001] * 3)
    change = read_history(out)[-1]
    assert change["changes"] == {"SOLVER.LR": [0.001, 0.01]} and change["from_epoch"] == 2
    assert change["after_iteration"] == stopped_at > 0
    assert "LR: 0.01" in (out / "config.yml").read_text()


def test_an_unreadable_folder_config_stops_the_run(synthetic_root, two_epochs, tmp_path):
    out = copy_of(two_epochs, tmp_path)
    (out / "config.yml").write_text("SOLVER: [unclosed\n")
    before = snapshot(out)
    proc = train(synthetic_root, out)
    assert proc.returncode == 2 and "the run folder's own config cannot be read" in proc.stderr
    assert snapshot(out) == before


# --- writes that fail ----------------------------------------------------------------------------------------


def _file_size_limit(limit):
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of being killed; kept across exec
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def train_limited(root, out, limit, *extra):
    env = dict(os.environ, PYTHONUNBUFFERED="1", **ONE_THREAD)
    return subprocess.run([sys.executable, os.path.join(REPO, "tools", "train_net.py"), *train_args(root, out, *extra)],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600,
                          preexec_fn=_file_size_limit(limit))


def error_lines(proc):
    return [line for line in (proc.stdout + proc.stderr).splitlines() if "ERROR" in line or line.startswith("error")]


def test_no_room_at_start_ends_with_one_line_and_leaves_nothing(synthetic_root, tmp_path):
    out = tmp_path / "none"
    proc = train_limited(synthetic_root, out, 0)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stdout + proc.stderr
    assert error_lines(proc) == [f"error: cannot write {out}/run.lock: File too large"]
    assert not out.exists()  # this run made the folder; it leaves nothing behind


def test_a_checkpoint_that_cannot_be_written_ends_with_one_line(synthetic_root, tmp_path):
    """A real write failure through torch.save (a file-size limit): exit 2 and one line, no partial file."""
    out = tmp_path / "limited"
    proc = train_limited(synthetic_root, out, 1_000_000)  # logs fit, a 3 MB checkpoint does not
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stdout + proc.stderr
    [line] = error_lines(proc)
    assert line.endswith(f"cannot write checkpoint {out}/model_1e.pth (File too large); no earlier checkpoint exists")
    # no checkpoint to resume from: the folder does not claim a run (config.yml is removed again)
    assert sorted(os.listdir(out)) == ["log.txt"]


def _in_small_tmpfs(size, out, command, keep):
    """``command`` run with OUTPUT_DIR on a tmpfs of ``size`` mounted in a private mount
    namespace (unshare: root, or user namespaces); the folder is copied to ``keep``
    before the namespace goes. None when this machine does not allow it."""
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
                            "mount -t tmpfs -o size=1m tmpfs /mnt && umount /mnt"], capture_output=True)
    if probe.returncode != 0:
        return None
    return subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
                           f'mkdir -p "$OUT" && mount -t tmpfs -o size={size} tmpfs "$OUT" && {command}; rc=$?; '
                           f'cp -a "$OUT" "{keep}"; exit $rc'],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600,
                          env=dict(os.environ, PYTHONUNBUFFERED="1", OUT=str(out), **ONE_THREAD))


def test_a_full_disk_during_the_second_checkpoint(synthetic_root, tmp_path):
    out, keep = tmp_path / "full", tmp_path / "kept"
    args = " ".join(f"'{a}'" for a in train_args(synthetic_root, out))
    proc = _in_small_tmpfs("5m", out, f'"{sys.executable}" {REPO}/tools/train_net.py {args}', keep)
    if proc is None:
        pytest.skip("no tmpfs can be mounted here (needs root or user namespaces); the file-size limit tests cover it")
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stdout + proc.stderr
    [line] = error_lines(proc)
    assert line.endswith(f"cannot write checkpoint {out}/model_2e.pth (No space left on device); the previous "
                         f"checkpoint {out}/model_1e.pth is intact and last_checkpoint still points to it")
    assert (keep / "last_checkpoint").read_text() == "model_1e.pth"
    assert torch.load(keep / "model_1e.pth", weights_only=False)["epoch"] == 2
    assert not [n for n in os.listdir(keep) if n.endswith(".tmp") or n == "run.lock"]
    # the rerun, with room: epoch 2's steps, logged before the failed save, are logged once
    assert [json.loads(line)["iter"] for line in open(keep / "metrics.jsonl")][-1] == 6
    proc = train(synthetic_root, keep)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    logged = [(r["epoch"], r["iter"]) for r in map(json.loads, open(keep / "metrics.jsonl"))]
    assert logged == [(epoch, it) for epoch in (1, 2) for it in (2, 4, 6)]


def test_a_full_disk_at_start(synthetic_root, tmp_path):
    out, keep = tmp_path / "full", tmp_path / "kept"
    args = " ".join(f"'{a}'" for a in train_args(synthetic_root, out))
    fill = 'dd if=/dev/zero of="$OUT/filler" bs=64k count=100 2>/dev/null'
    proc = _in_small_tmpfs("1m", out, f'{fill}; "{sys.executable}" {REPO}/tools/train_net.py {args}', keep)
    if proc is None:
        pytest.skip("no tmpfs can be mounted here (needs root or user namespaces); the file-size limit tests cover it")
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stdout + proc.stderr
    assert error_lines(proc) == [f"error: cannot write {out}/run.lock: No space left on device"]
    assert os.listdir(keep) == ["filler"]


def test_a_log_that_cannot_be_written_at_start_stops_the_run(synthetic_root, tmp_path):
    """run.lock fits under the limit, the log's config dump does not."""
    out = tmp_path / "log"
    proc = train_limited(synthetic_root, out, 1500)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stdout + proc.stderr and "Logging error" not in proc.stderr
    assert error_lines(proc)[-1].endswith(f"cannot write {out}/log.txt: File too large")
    # refused at its start in a folder it made: the part of the log it could write goes with the folder
    assert not out.exists()


def test_a_log_file_that_fails_later_is_switched_off_with_one_warning(tmp_path, capsys):
    import errno

    from tan.utils.logger import get_logger, log_file_failure, setup_logger

    import logging

    tan_logger = logging.getLogger("tan")
    saved = list(tan_logger.handlers), tan_logger.propagate, tan_logger.level
    logger = setup_logger(str(tmp_path), stream=sys.stderr)
    logger.info("first line")
    [file_handler] = [h for h in logger.handlers if getattr(h, "baseFilename", None)]

    class FullDisk:
        def write(self, text):
            raise OSError(errno.ENOSPC, "No space left on device")

        def flush(self):
            pass

    file_handler.stream = FullDisk()
    get_logger("trainer").info("second line")
    get_logger("trainer").info("third line")
    err = capsys.readouterr().err
    assert err.count("cannot write") == 1 and "the log continues on the console only" in err
    assert "Traceback" not in err and "third line" in err
    path, error = log_file_failure()
    assert path == str(tmp_path / "log.txt") and error.errno == errno.ENOSPC
    assert (tmp_path / "log.txt").read_text().count("line") == 1
    for handler in list(logger.handlers):  # the logger as it was, with no handler on capsys' stream
        logger.removeHandler(handler)
    for handler in saved[0]:
        logger.addHandler(handler)
    logger.propagate, logger.level = saved[1], saved[2]


def test_a_metrics_record_that_cannot_be_written_is_cut_off_and_named(tmp_path):
    """A real short write (a file-size limit in this process): the file keeps its
    whole records only, and the error names it."""
    from tan.engine.records import RunRecords

    path = tmp_path / "metrics.jsonl"
    path.write_text('{"epoch": 1}\n')
    records = RunRecords(str(tmp_path))
    with file_size_limit(path.stat().st_size + 10), \
            pytest.raises(TanError, match=f"cannot write {path}: File too large"):
        records.write({"epoch": 2, "loss": 0.123456789, "note": "x" * 100})
    assert path.read_text() == '{"epoch": 1}\n'


def test_records_are_cut_back_to_what_a_checkpoint_saw(tmp_path):
    """RunRecords: a checkpoint's lengths, then lines written after it (one cut short by a kill); a
    run resumed from it keeps the lines before it, empties a hook's file the checkpoint never saw
    when it first writes to it, and a checkpoint without lengths keeps the records before its
    iteration and its first validation to come."""
    from tan.engine.records import RunRecords

    records = RunRecords(str(tmp_path))
    for iteration in (2, 4):
        records.write({"epoch": 1, "iter": iteration, "iteration": iteration})
    records.write({"epoch": 1, "note": "a hook's"}, "mine.jsonl")
    saved = records.lengths()
    assert saved == {"metrics.jsonl": 2, "mine.jsonl": 1}
    records.write({"epoch": 2, "iter": 2, "iteration": 6})
    records.write({"epoch": 1, "dataset": "val", "R@1": 5.0})
    records.write({"epoch": 2}, "mine.jsonl")
    records.write({"epoch": 2}, "late.jsonl")
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write('{"epoch": 2, "it')  # a line a kill cut short
    resumed = RunRecords(str(tmp_path))
    resumed.rewind(saved)
    assert [json.loads(line)["iteration"] for line in open(tmp_path / "metrics.jsonl")] == [2, 4]
    assert (tmp_path / "mine.jsonl").read_text() == '{"epoch": 1, "note": "a hook\'s"}\n'
    assert (tmp_path / "late.jsonl").read_text() == '{"epoch": 2}\n'  # untouched until written to
    resumed.write({"epoch": 2, "again": True}, "late.jsonl")
    assert (tmp_path / "late.jsonl").read_text() == '{"epoch": 2, "again": true}\n'
    assert resumed.lengths() == {"metrics.jsonl": 2, "mine.jsonl": 1, "late.jsonl": 1}
    resumed.rewind({})  # a run that starts afresh: no record of before is its own
    assert (tmp_path / "metrics.jsonl").read_text() == ""
    resumed.write({"epoch": 1}, "mine.jsonl")
    assert (tmp_path / "mine.jsonl").read_text() == '{"epoch": 1}\n'

    from tan.engine.records import recorded_before
    from tan.engine.state import TrainingState

    for record in ({"epoch": 1, "iter": 4, "iteration": 4}, {"epoch": 1, "dataset": "val"},
                   {"epoch": 2, "iter": 2, "iteration": 6}, {"epoch": 2, "dataset": "val"}):
        resumed.write(record)
    # an epoch's end saved before its hooks ran (epoch 2's), by a version that counted no records
    resumed.rewind(None, legacy_keep=recorded_before(TrainingState(epoch=3, iteration=8)))
    assert [json.loads(line) for line in open(tmp_path / "metrics.jsonl")] == [
        {"epoch": 1, "iter": 4, "iteration": 4}, {"epoch": 1, "dataset": "val"}, {"epoch": 2, "iter": 2, "iteration": 6}]
    with pytest.raises(TanError, match="a record file is named like 'my_hook.jsonl'"):
        resumed.write({}, "../elsewhere.txt")
