#!/usr/bin/env python
"""Measure the data side of training: how long building the training
datasets takes, and the peak memory of a training process with its loader
workers (proportional set size, summed over the process tree, so pages the
workers share with the parent are counted once).

Runs tools/train_net.py (with --skip-test) for --seconds, sampling memory,
then stops it. Give the model a small width on CPU so that the figure is the
data's, not the activations'.

Example:
  python tools/measure_data.py --seconds 90 --config-file configs/2dtan_64x64_pool_k9l4_activitynet.yaml \\
      DATASETS.ROOT datasets_standin MODEL.DEVICE cpu DATALOADER.NUM_WORKERS 4 MODEL.TAN.FEATPOOL.HIDDEN_SIZE 16 \\
      MODEL.TAN.INTEGRATOR.QUERY_HIDDEN_SIZE 16 MODEL.TAN.PREDICTOR.HIDDEN_SIZE 16 OUTPUT_DIR outputs/measure
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import checkout_path  # noqa: F401  (this checkout's tan first on sys.path)
from tan_apps.cli.exit_codes import run_cli
from tan.config import load_config
from tan.data import RunData
from tan.utils.logger import setup_logger
import tan_apps.synthetic  # noqa: F401  (the built-in synthetic dataset, written on first use)


def _children():
    tree = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                tree.setdefault(ppid, []).append(int(pid))
            except (OSError, IndexError, ValueError):
                pass
    return tree


def tree_pss_mb(root_pid):
    """Sum of Pss over ``root_pid`` and its descendants, in MB."""
    tree, stack, total, count = _children(), [root_pid], 0, 0
    while stack:
        pid = stack.pop()
        stack.extend(tree.get(pid, []))
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
                        count += 1
                        break
        except OSError:
            pass
    return total / 1024, count


def time_dataset_build(config_file, opts):
    """Seconds to build the training datasets: first (which may fill the
    word-vector cache), then again in a new run, which reads that cache."""
    cfg = load_config(config_file, opts)
    times = []
    for _ in range(2):
        start = time.perf_counter()
        RunData(cfg).datasets(cfg.DATASETS.TRAIN)  # a new RunData: nothing kept from the first pass
        times.append(time.perf_counter() - start)
    return tuple(times)


def build_parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config-file", required=True)
    parser.add_argument("--seconds", type=float, default=90, help="how long to let training run")
    parser.add_argument("opts", nargs=argparse.REMAINDER, help="KEY VALUE overrides for the run")
    return parser


def main():
    args = build_parser().parse_args()
    setup_logger(None)

    first, warm = time_dataset_build(args.config_file, args.opts)
    print(f"building the training datasets: {first:.1f} s the first time, {warm:.1f} s from a warm cache",
          flush=True)

    tool = os.path.join(os.path.dirname(os.path.abspath(__file__)), "train_net.py")
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen([sys.executable, tool, "--config-file", args.config_file, "--skip-test", *args.opts],
                                stdout=log, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        peak, peak_procs, start = 0.0, 0, time.perf_counter()
        try:
            while proc.poll() is None and time.perf_counter() - start < args.seconds:
                pss, procs = tree_pss_mb(proc.pid)
                if pss > peak:
                    peak, peak_procs = pss, procs
                time.sleep(0.25)
        finally:  # the run and its loader workers share a new session: stop them all
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.seek(0)
        text = log.read()
    iterations = [line for line in text.splitlines() if "eta:" in line]
    print(iterations[-1] if iterations else text[-2000:])
    report = {"dataset_build_first_s": round(first, 2), "dataset_build_warm_s": round(warm, 2),
              "peak_pss_mb": round(peak, 1), "processes_at_peak": peak_procs,
              "seconds_trained": round(time.perf_counter() - start, 1), "log_lines": len(iterations)}
    print(json.dumps(report))


if __name__ == "__main__":
    run_cli(main)
