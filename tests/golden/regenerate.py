#!/usr/bin/env python
"""Re-create the golden fixtures of tests/test_golden.py from the current code.

    python tests/golden/regenerate.py

Run it ONLY when a change of behaviour is intended (a different training
result, other logits, another checkpoint format, ...), and say in the commit
that updates the fixtures why the behaviour changed. A refactoring must pass
tests/test_golden.py against the fixtures as they are, not regenerate them.

It runs on this checkout's code (the repository two folders up, whatever
``tan`` is installed elsewhere), on CPU, one thread per process, with the
settings of tests/golden/settings.py, and writes into tests/golden/:

  machine.json       torch version, CPU capability, CPU model and kernel-relevant
                     CPU flags of this machine: the comparisons are bit-exact
                     only where all of them match
  weights.json       sha256 / dtype / shape of every tensor of the golden run's
                     final model ("model" of model_final.pth)
  model_final.pth    that final checkpoint itself (for test_net, and for the
                     tolerance comparison on other machines)
  metrics.json       inference/model_final/synthetic_test/metrics.json of the golden run,
                     without the "checkpoint" path
  predictions.jsonl  inference/model_final/synthetic_test/predictions.jsonl of the golden run
  records.json       metrics.jsonl records (training and validation, without
                     timing fields), model_best.pth's "best" and epoch, and the
                     best model's test metrics
  logits.pt          logits of the seeded golden-config model on a seeded input
  resume_from.pth    a mid-epoch checkpoint of the golden run, interrupted by
                     SIGTERM (resuming it must end with weights.json)

The golden run is trained twice and the resume checked before anything is
written, so the fixtures are reproducible on this machine. Takes about a
minute on 2 CPU cores.
"""
import json
import os
import shutil
import signal
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, REPO)  # this checkout's tan, not an installed one
sys.path.insert(1, os.path.dirname(HERE))  # tests/, for golden.settings and runs

import torch  # noqa: E402

import tan  # noqa: E402
from tan_apps.synthetic.features import ensure_synthetic  # noqa: E402

from golden import settings as S  # noqa: E402


def check(condition, message):
    if not condition:
        sys.exit(f"regenerate: {message}; no fixture written")


def train(root, out, *extra):
    proc = S.run_tool("train_net", *S.train_args(root, out, *extra))
    check(proc.returncode == 0, f"training in {out} failed:\n{proc.stdout[-3000:]}")


def main():
    check(os.path.dirname(os.path.dirname(os.path.abspath(tan.__file__))) == REPO,
          f"tan is imported from {tan.__file__}, not from {REPO}")
    work = tempfile.mkdtemp(prefix="tan-golden-")
    try:
        root = os.path.join(work, "datasets")
        ensure_synthetic(root)

        # The golden run, twice: the fixtures must not depend on the run.
        golden, again = os.path.join(work, "golden"), os.path.join(work, "again")
        train(root, golden)
        train(root, again)
        final = S.load_checkpoint(os.path.join(golden, "model_final.pth"))
        weights = S.weight_digests(final["model"])
        check(weights == S.weight_digests(S.load_checkpoint(os.path.join(again, "model_final.pth"))["model"]),
              "two golden runs ended with different weights")
        for reduce in (S.records_of, S.read_test_metrics, lambda out: open(S.predictions_path(out)).read()):
            check(reduce(golden) == reduce(again), "two golden runs wrote different results")
        training, validation = S.records_of(golden)
        check(validation and training, "the golden run wrote no training or validation records")
        best = S.load_checkpoint(os.path.join(golden, "model_best.pth"))

        # A mid-epoch checkpoint of the golden run, and a check that resuming it ends as the golden run did.
        interrupted = os.path.join(work, "interrupted")
        code, output, _ = S.run_interrupted("train_net", S.train_args(root, interrupted),
                                            os.path.join(interrupted, "metrics.jsonl"), S.RESUME_FROM_AT)
        check(code == 128 + signal.SIGTERM, f"the interrupted golden run ended with {code}:\n{output[-3000:]}")
        with open(os.path.join(interrupted, "last_checkpoint")) as f:
            saved = os.path.join(interrupted, f.read().strip())
        check(S.load_checkpoint(saved).get("iter_in_epoch"), f"{saved} is not a mid-epoch checkpoint")
        resumed = os.path.join(work, "resumed")
        os.makedirs(resumed)
        shutil.copyfile(saved, os.path.join(resumed, "resume_from.pth"))
        with open(os.path.join(resumed, "last_checkpoint"), "w") as f:
            f.write("resume_from.pth")
        train(root, resumed)
        check(S.weight_digests(S.load_checkpoint(os.path.join(resumed, "model_final.pth"))["model"]) == weights,
              "resuming the mid-epoch checkpoint did not end with the golden weights")

        logits = S.fixed_logits()
        check(torch.equal(logits, S.fixed_logits()), "the fixed model's logits differ between two computations")

        # Everything checked: write the fixtures.
        def write_json(key, obj):
            with open(S.FILES[key], "w") as f:
                f.write(json.dumps(obj, indent=1) + "\n")

        write_json("machine", {**S.machine_info(), "recorded_on": S.machine_description()})
        write_json("weights", weights)
        shutil.copyfile(os.path.join(golden, "model_final.pth"), S.FILES["model_final"])
        write_json("metrics", S.read_test_metrics(golden))
        shutil.copyfile(S.predictions_path(golden), S.FILES["predictions"])
        write_json("records", {"training": training, "validation": validation, "best": best["best"],
                               "best_epoch": best["epoch"],
                               "best_test_metrics": S.read_test_metrics(golden, "model_best")})
        torch.save(logits, S.FILES["logits"])
        shutil.copyfile(saved, S.FILES["resume_from"])
        print(f"golden fixtures written to {HERE} (interrupted at {os.path.basename(saved)}; "
              f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()})")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
