"""Watching and stopping training runs that tests (and tests/golden/regenerate.py)
start in the background: what they wrote to metrics.jsonl, not their log wording."""
import json
import os
import signal
import time


def stop_process_group(proc):
    """Kill a background run started with ``start_new_session=True`` and all it
    started (loader workers, torchrun's workers) if it is still running."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


def count_lines(path):
    """Lines in a file (0 when it does not exist yet): what earlier runs wrote."""
    if not os.path.isfile(path):
        return 0
    with open(path) as f:
        return sum(1 for _ in f)


def wait_for_training_record(out_dir, proc, epoch, it, timeout=300, skip_lines=0):
    """Block until the run writing ``out_dir`` has logged iteration ``it`` of
    ``epoch`` (or a later one) to metrics.jsonl, past its first ``skip_lines``
    lines (what earlier runs wrote); fails if the process ends first or the
    time runs out. Public output, not log wording."""
    path = os.path.join(str(out_dir), "metrics.jsonl")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.isfile(path):
            with open(path) as f:
                for number, line in enumerate(f):
                    if number < skip_lines:
                        continue
                    if not line.endswith("\n"):
                        break  # a line being written
                    try:
                        record = json.loads(line)
                    except ValueError:  # a line cut short by a killed writer
                        continue
                    if "iter" in record and (record["epoch"], record["iter"]) >= (epoch, it):
                        return record
        if proc.poll() is not None:
            raise AssertionError(f"the run ended (exit {proc.returncode}) before epoch {epoch} iteration {it}")
        time.sleep(0.05)
    raise AssertionError(f"no record of epoch {epoch} iteration {it} in {path} after {timeout} s")


def signal_after_record(out_dir, proc, epoch, it, signum=signal.SIGTERM, timeout=120):
    """Send ``signum`` to a background run once it has logged iteration ``it``
    of ``epoch``, and wait for it to end (killing it and its children if it
    does not); returns its exit code."""
    try:
        wait_for_training_record(out_dir, proc, epoch, it)
        proc.send_signal(signum)
        proc.wait(timeout=timeout)
    finally:
        stop_process_group(proc)
    return proc.returncode


def final_weights(out_dir):
    """The model state dict of OUTPUT_DIR's model_final.pth."""
    import torch
    return torch.load(os.path.join(out_dir, "model_final.pth"), weights_only=False)["model"]


def result_metrics(results, dataset="synthetic_test"):
    """metrics.json of ``dataset`` under a results folder (OUTPUT_DIR/inference/NAME)."""
    with open(os.path.join(results, dataset, "metrics.json")) as f:
        return json.load(f)

