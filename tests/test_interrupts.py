"""Ctrl-C at any moment ends a tool with one line and exit status 130, no
traceback (from the tool or its loader workers) and nothing half-written; and
a file that cannot be written ends it with one line and exit status 2.

The end-to-end tests start a tool in its own session and send SIGINT to the
whole process group, as a terminal does on Ctrl-C."""
import errno
import hashlib
import os
import random
import re
import signal
import subprocess
import sys
import time

import pytest
import torch

from tan_apps.cli import signal_exits
from tan.config import load_config
from tan_apps.cli.exit_codes import run_cli
from tan.modeling import build_model
from tan.utils.held_signals import signals_held

from conftest import REPO, SYNTHETIC_CONFIG, file_size_limit
from runs import stop_process_group, wait_for_training_record

slow = pytest.mark.slow

# Two loader workers: they receive the SIGINT too and must stay quiet.
RUN = ["MODEL.DEVICE", "cpu", "DATALOADER.NUM_WORKERS", "2", "SOLVER.BATCH_SIZE", "8", "SOLVER.LOG_PERIOD", "1",
       "SOLVER.TEST_PERIOD", "0", "SOLVER.MAX_EPOCH", "1", "SOLVER.ITERS_PER_EPOCH", "6"]


# --- in-process: run_cli's endings -------------------------------------------------------------------------------

def ended(main, capsys):
    """(exit code, stderr lines) of run_cli(main)."""
    with pytest.raises(SystemExit) as stop:
        run_cli(main)
    return stop.value.code, capsys.readouterr().err.splitlines()


def raising(error):
    def main():
        raise error
    return main


@pytest.mark.parametrize("error,line", [
    (OSError(errno.ENOSPC, "No space left on device", "/out/model_3e.pth"),
     "cannot write /out/model_3e.pth: No space left on device"),
    (OSError(errno.EDQUOT, "Disk quota exceeded", "/out/log.txt"), "cannot write /out/log.txt: Disk quota exceeded"),
    (OSError(errno.EROFS, "Read-only file system", "/out"), "cannot write /out: Read-only file system"),
    (PermissionError(errno.EACCES, "Permission denied", "/out/config.yml"),
     "cannot read or write /out/config.yml: Permission denied"),
    (OSError(errno.EIO, "Input/output error"), "cannot read or write a file (the system did not say which): "
                                               "Input/output error"),
])
def test_a_failed_write_ends_with_one_line_naming_the_path_and_exit_2(error, line, capsys):
    assert ended(raising(error), capsys) == (2, [f"error: {line}"])


def test_a_path_that_is_a_file_where_a_folder_should_be(tmp_path, capsys):
    (tmp_path / "inference").write_text("in the way")
    code, lines = ended(lambda: os.makedirs(tmp_path / "inference" / "synthetic_test", exist_ok=True), capsys)
    assert code == 2 and lines == [f"error: cannot read or write {tmp_path / 'inference' / 'synthetic_test'}: "
                                   f"Not a directory"]
    code, lines = ended(lambda: os.makedirs(tmp_path / "inference", exist_ok=True), capsys)
    assert code == 2 and lines == [f"error: cannot write {tmp_path / 'inference'}: File exists "
                                   f"(a file is where a folder should be)"]


def test_torch_save_on_a_full_disk_is_a_failed_write_not_a_bug(capsys, tmp_path):
    """torch.save raises RuntimeError("[enforce fail at inline_container.cc] ...
    unexpected pos") while handling the OSError; the atomic writer gives the
    OSError back, with the path, and the net reports it (a real short write:
    a file-size limit in this process)."""
    from tan.utils.io import atomic_torch_save

    path = tmp_path / "model.pth"
    with file_size_limit(1000):
        code, lines = ended(lambda: atomic_torch_save({"w": torch.zeros(10000)}, str(path)), capsys)
    assert code == 2 and lines == [f"error: cannot write {path}: File too large"]
    assert os.listdir(tmp_path) == []  # no partial file


@pytest.mark.parametrize("error", [
    FileNotFoundError(errno.ENOENT, "No such file or directory", "/missing"),  # not a write failure
    RuntimeError("a bug"),
    ValueError("a bug"),
])
def test_other_errors_keep_their_traceback(error):
    with pytest.raises(type(error)):
        run_cli(raising(error))


def test_a_bug_raised_while_handling_a_missing_file_keeps_its_traceback():
    def main():
        try:
            open("/nonexistent/x")
        except OSError:
            raise RuntimeError("a bug")
    with pytest.raises(RuntimeError, match="a bug"):
        run_cli(main)


# --- in-process: Ctrl-C under run_cli -----------------------------------------------------------------------------

def test_keyboard_interrupt_is_one_line_naming_the_activity_and_exit_130(capsys):
    def main():
        signal_exits.now_doing("testing", "checkpoints and earlier results are kept")
        raise KeyboardInterrupt
    assert ended(main, capsys) == (130, ["warning: interrupted (Ctrl-C) while testing; "
                                         "checkpoints and earlier results are kept"])


def test_a_real_sigint_in_main_ends_it_and_leaves_the_handler_as_it_was(capsys):
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # pytest is not a tool

    def main():
        signal_exits.now_doing("drawing", "pictures already written are complete")
        signal.raise_signal(signal.SIGINT)
        time.sleep(5)
        raise AssertionError("the interrupt did not stop main()")
    assert ended(main, capsys) == (130, ["warning: interrupted (Ctrl-C) while drawing; "
                                         "pictures already written are complete"])
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_sigterm_in_main_ends_it_like_ctrl_c_with_exit_143_and_is_given_back(capsys, tmp_path):
    """SIGTERM (kill, a scheduler, a container's stop) runs the same clean-ups as a Ctrl-C."""
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    cleaned = []

    def main():
        signal_exits.now_doing("converting features", "nothing was written to dst and the partial copy is removed")
        try:
            signal.raise_signal(signal.SIGTERM)
            time.sleep(5)
            raise AssertionError("SIGTERM did not stop main()")
        finally:
            cleaned.append(True)
    assert ended(main, capsys) == (143, ["warning: terminated (SIGTERM) while converting features; nothing was "
                                         "written to dst and the partial copy is removed"])
    assert cleaned == [True]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_forked_process_ends_on_sigterm_as_by_default(capsys):
    """A DataLoader stops a worker that does not answer with SIGTERM: the worker must not ignore it."""
    def main():
        for _ in range(20):  # the signal sent at once: it may come before the child runs any Python
            pid = os.fork()
            if pid == 0:  # the worker
                time.sleep(10)
                os._exit(0)
            os.kill(pid, signal.SIGTERM)
            _, status = os.waitpid(pid, 0)
            assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM
    run_cli(main)  # ends normally: no SystemExit


def test_a_sigterm_that_was_ignored_at_start_stays_ignored(capsys):
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        def main():
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
            signal.raise_signal(signal.SIGTERM)
        run_cli(main)
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.slow
def test_the_interrupt_tests_pass_when_pytest_runs_as_a_background_job(tmp_path):
    """A script's ``python -m pytest &`` starts pytest with SIGINT ignored (and every child it
    launches, unless a test sets the disposition it needs): in-process and end-to-end Ctrl-C
    tests must pass there too."""
    def as_a_background_job():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    chosen = ["test_a_real_sigint_in_main_ends_it_and_leaves_the_handler_as_it_was",
              "test_signals_held_over_writes_that_belong_together_arrive_after_them",
              "test_ctrl_c_while_the_tool_starts"]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                           "--full", "--basetemp", str(tmp_path / "base"), os.path.abspath(__file__), "-k", " or ".join(chosen)],
                          cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600,
                          preexec_fn=as_a_background_job)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert re.search(r"\b5 passed\b", proc.stdout), proc.stdout[-3000:]


class InterruptedOnCollection:
    """Raises KeyboardInterrupt where Python can only print "Exception ignored"
    (as the logging module's fork callback does when DataLoader workers start)."""

    def __del__(self):
        raise KeyboardInterrupt


def test_a_swallowed_keyboard_interrupt_is_delivered_again(capsys):
    def main():
        InterruptedOnCollection()  # collected at once: the interrupt is swallowed
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            time.sleep(0.01)
        raise AssertionError("the swallowed interrupt was not delivered again")
    code, lines = ended(main, capsys)
    assert code == 130 and len(lines) == 1 and "interrupted (Ctrl-C)" in lines[0]


def uninterruptible_part(log):
    signal.raise_signal(signal.SIGINT)
    for _ in range(3):
        time.sleep(0.02)  # the interrupt must not land here
        log.append("step")


def test_an_interrupt_waits_until_code_that_must_not_be_cut_is_done(monkeypatch, capsys):
    """As while a DataLoader worker is forked or a batch's tensors are received."""
    monkeypatch.setattr(signal_exits, "UNINTERRUPTIBLE", ((__name__, "uninterruptible_part"),))
    log = []

    def main():
        uninterruptible_part(log)
        log.append("after")
        time.sleep(5)
        raise AssertionError("the interrupt was lost")
    start = time.monotonic()
    code, lines = ended(main, capsys)
    assert code == 130 and len(lines) == 1
    assert log[:3] == ["step"] * 3
    assert time.monotonic() - start < 2  # delivered again at once, even into a blocking call


def test_signals_held_over_writes_that_belong_together_arrive_after_them():
    done = []
    with pytest.raises(KeyboardInterrupt):
        with signals_held():
            signal.raise_signal(signal.SIGINT)
            done.append("first")
            done.append("second")
    assert done == ["first", "second"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.parametrize("argv0,tool", [
    ("/venv/bin/tan-train", True), ("/venv/bin/tan-predict", True),
    (os.path.join(REPO, "tools", "visualize.py"), True), ("-m", True),  # python -m tan_apps.commands.predict
    ("-c", False), ("/venv/bin/pytest", False), ("/home/me/analysis.py", False), ("", False),
])
def test_only_tools_take_sigint_over_at_import(argv0, tool, monkeypatch):
    monkeypatch.setattr(sys, "argv", [argv0])
    assert signal_exits.started_as_a_tool() == tool


# --- end to end: a tool stopped by SIGINT to its process group ----------------------------------------------------

def start(command, console, cwd=None, env=None):
    """``command`` in the background in its own session, its output in ``console``."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", **(env or {}))
    with open(console, "w") as f:
        return subprocess.Popen(command, stdout=f, stderr=subprocess.STDOUT, text=True, cwd=cwd, env=env,
                                start_new_session=True)


def tool(name, *args):
    return [sys.executable, os.path.join(REPO, "tools", f"{name}.py"), *args]


def wait_until(condition, proc, what, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        assert proc.poll() is None, f"the tool ended (exit {proc.returncode}) before {what}"
        time.sleep(0.02)
    raise AssertionError(f"no {what} within {timeout} s")


def wait_for_text(path, text, proc, start_at=0):
    """Block until ``text`` appears in ``path`` past its first ``start_at`` bytes."""
    def appeared():
        if not os.path.isfile(path):
            return False
        with open(path) as f:
            f.seek(start_at)
            return text in f.read()
    wait_until(appeared, proc, f"{text!r} in {path}")


def ctrl_c(proc, console):
    """SIGINT to the tool's whole process group, as a terminal sends it; its output."""
    try:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=60)
    finally:
        stop_process_group(proc)
    with open(console) as f:
        return f.read()


def assert_one_interruption_line(proc, output, pattern=r"interrupted \(Ctrl-C\) while "):
    """Exit 130, one line about the interruption, no traceback from anyone."""
    assert proc.returncode == 130, output[-3000:]
    lines = [line for line in output.splitlines() if "interrupted" in line]
    assert len(lines) == 1 and re.search(pattern, lines[0]), output[-3000:]
    assert "Traceback" not in output and "Exception ignored" not in output, output[-3000:]
    return lines[0]


def assert_nothing_half_written(*folders):
    for folder in folders:
        for root, _, files in os.walk(folder):
            for name in files:
                path = os.path.join(root, name)
                assert not name.endswith(".tmp"), path
                assert os.path.getsize(path) > 0 or name == "log.txt", f"empty file {path}"


def digests(folder):
    """{relative path: sha256} of every file under ``folder`` but the logs, which grow."""
    found = {}
    for root, _, files in os.walk(folder):
        for name in files:
            if name != "log.txt":
                path = os.path.join(root, name)
                with open(path, "rb") as f:
                    found[os.path.relpath(path, folder)] = hashlib.sha256(f.read()).hexdigest()
    return found


CONSOLE_SCRIPT = """#!{python}
import re
import sys
from tan_apps.commands.test import cli
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(cli())
"""


@slow
@pytest.mark.parametrize("how", ["tools/train_net.py", "tan-test console script", "python -m tan_apps.commands.predict"])
def test_ctrl_c_while_the_tool_starts(how, synthetic_root, tmp_path):
    """Mostly while torch is imported: a short random delay."""
    out = tmp_path / "out"
    config = ["--config-file", SYNTHETIC_CONFIG, "DATASETS.ROOT", synthetic_root, "OUTPUT_DIR", str(out)]
    env = {"PYTHONPATH": REPO}  # a console script finds this checkout's tan, as an installed one would
    if how.startswith("tools/"):
        command = tool("train_net", *config, *RUN)
    elif how.startswith("tan-test"):
        script = tmp_path / "tan-test"  # what pip writes for [project.scripts]
        script.write_text(CONSOLE_SCRIPT.format(python=sys.executable))
        command = [sys.executable, str(script), *config, *RUN]
    else:
        checkpoint = tmp_path / "model.pth"
        torch.save({"model": build_model(load_config(SYNTHETIC_CONFIG)).state_dict()}, checkpoint)
        command = [sys.executable, "-m", "tan_apps.commands.predict", *config, "--ckpt", str(checkpoint),
                   "--video", "syn_test_0000", "--query", "a person opens the door"]
    proc = start(command, tmp_path / "console.txt", env=env)
    time.sleep(random.Random(how).uniform(0.2, 0.8))
    line = assert_one_interruption_line(proc, ctrl_c(proc, tmp_path / "console.txt"))
    if "while starting" in line:
        assert line == "warning: interrupted (Ctrl-C) while starting; nothing was written"
        assert not out.exists()
    else:  # a fast machine got further
        assert_nothing_half_written(out)


@slow
def test_ctrl_c_while_the_data_is_prepared(tmp_path):
    """The synthetic dataset is generated on first use: during the setup, when the check of what training
    shares with evaluation reads the annotations, before the run folder is made."""
    root, out = tmp_path / "root", tmp_path / "out"
    features = root / "synthetic" / "features"

    def writing():
        return features.is_dir() and any(n.endswith(".tmp") for n in os.listdir(features))
    proc = start(tool("train_net", "--config-file", SYNTHETIC_CONFIG, "DATASETS.ROOT", str(root), "OUTPUT_DIR",
                      str(out), *RUN), tmp_path / "console.txt")
    wait_until(writing, proc, f"a temporary file in {features}")  # the generator is writing
    output = ctrl_c(proc, tmp_path / "console.txt")
    line = assert_one_interruption_line(proc, output)
    assert line.endswith("interrupted (Ctrl-C) while preparing the run; checkpoints and results are kept as "
                         "they were")
    assert not out.exists()  # the run never started: no folder claims one
    assert not (root / "synthetic" / "READY").exists()  # the next run generates the data again
    assert not [n for n in os.listdir(features) if n.endswith(".tmp")]  # no half-written feature file


@pytest.fixture(scope="module")
def stopped_run(synthetic_root, tmp_path_factory):
    """A training run stopped by Ctrl-C in its first epoch: (OUTPUT_DIR, its
    arguments, the console output, the process)."""
    out = tmp_path_factory.mktemp("stopped") / "out"
    args = ["--config-file", SYNTHETIC_CONFIG, "DATASETS.ROOT", synthetic_root, "OUTPUT_DIR", str(out), *RUN]
    console = f"{out}.console.txt"
    proc = start(tool("train_net", *args), console)
    try:
        wait_for_training_record(out, proc, epoch=1, it=1, timeout=120)
    except AssertionError:
        stop_process_group(proc)
        raise
    return out, args, ctrl_c(proc, console), proc


@slow
def test_ctrl_c_while_training_saves_a_checkpoint_to_resume_from(stopped_run):
    out, _, output, proc = stopped_run
    assert proc.returncode == 130, output[-3000:]
    lines = [line for line in output.splitlines() if "interrupted" in line]
    assert len(lines) == 1 and re.search(r"WARNING: interrupted by SIGINT in epoch 1 after iteration \d; saved "
                                         r".*model_1e_\dit.pth. Run the same command again", lines[0]), output
    assert "Traceback" not in output and "Exception ignored" not in output, output[-3000:]
    assert lines[0].split("WARNING: ")[1] in (out / "log.txt").read_text()
    saved = (out / "last_checkpoint").read_text()
    assert re.fullmatch(r"model_1e_\dit.pth", saved) and (out / saved).is_file()
    assert (out / "metrics.jsonl").read_text().endswith("\n")  # whole records only
    assert_nothing_half_written(out)


@slow
def test_ctrl_c_while_the_trained_model_is_tested(stopped_run, tmp_path):
    """The run resumes, finishes training and tests: stopped as the test starts
    (when its loader workers are being forked)."""
    out, args, _, _ = stopped_run
    before, log_size = digests(out / "inference"), os.path.getsize(out / "log.txt")
    proc = start(tool("train_net", *args), tmp_path / "console.txt")
    wait_for_text(out / "log.txt", "evaluating on synthetic_test", proc, start_at=log_size)
    output = ctrl_c(proc, tmp_path / "console.txt")
    line = assert_one_interruption_line(proc, output, r"WARNING: interrupted \(Ctrl-C\) while testing; checkpoints "
                                                      r"and earlier results are kept; test .*model_final.pth later")
    assert line.split("WARNING: ")[1] in (out / "log.txt").read_text()
    assert (out / "last_checkpoint").read_text() == "model_final.pth"
    assert digests(out / "inference") == before  # no result written, earlier ones (if any) left alone
    assert_nothing_half_written(out)


@slow
def test_ctrl_c_while_tan_test_evaluates_leaves_checkpoints_and_earlier_results(stopped_run, tmp_path):
    out, args, _, _ = stopped_run
    earlier = out / "inference" / "model_final" / "synthetic_test"
    earlier.mkdir(parents=True, exist_ok=True)
    (earlier / "metrics.json").write_text('{"earlier": true}\n')
    (earlier / "predictions.jsonl").write_text('{"earlier": true}\n')
    before, log_size = digests(out), os.path.getsize(out / "log.txt")
    proc = start(tool("test_net", *args), tmp_path / "console.txt")
    wait_for_text(out / "log.txt", "evaluating on synthetic_test", proc, start_at=log_size)
    time.sleep(0.3)  # into the evaluation proper
    output = ctrl_c(proc, tmp_path / "console.txt")
    assert_one_interruption_line(proc, output, r"WARNING: interrupted \(Ctrl-C\) while testing; checkpoints and "
                                               r"earlier results are kept$")
    assert digests(out) == before  # config.yml, checkpoints and the earlier results, byte for byte
    assert_nothing_half_written(out)


def test_every_console_script_is_a_tool_name():
    """An entry point missing from TOOL_NAMES would start without the tools' Ctrl-C handling."""
    with open(os.path.join(REPO, "pyproject.toml"), encoding="utf-8") as f:
        section = f.read().split("[project.scripts]", 1)[1].split("\n[", 1)[0]
    scripts = set(re.findall(r"^([\w-]+)\s*=", section, re.M))
    assert "tan-demo" in scripts
    assert scripts == set(signal_exits.TOOL_NAMES)
