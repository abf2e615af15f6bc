"""tan-train --seeds: one run folder per seed, a summary of every metric over the seeds, a stopped
command resumed without redoing a finished seed, tan-test's summary over the seed folders, and the
SLURM path through submitit's local executor."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tan_apps.commands.train import main as train_main
from tan.config.choices import metric_names
from tan.errors import TanError

from conftest import REPO, SYNTHETIC_CONFIG, run_tool

# tested on the val split (298 queries, against test's 602): the summary's arithmetic is the same
QUICK = ["MODEL.DEVICE", "cpu", "DATALOADER.NUM_WORKERS", "0", "SOLVER.TEST_PERIOD", "0", "SOLVER.MILESTONES", "(9,)",
         "DATASETS.VAL", "()", "DATASETS.TEST", "('synthetic_val',)"]


def summary(folder):
    with open(os.path.join(folder, "seeds_summary.json")) as f:
        return json.load(f)


def final_rows(record):
    return {r["metric"]: r for r in record["rows"] if r["model"] == "model_final" and r["dataset"] == "synthetic_val"}


def wait_for(path, proc, timeout=300):
    start = time.monotonic()
    while not os.path.exists(path):
        assert proc.poll() is None, proc.communicate()[0][-3000:]
        assert time.monotonic() - start < timeout, f"{path} never appeared"
        time.sleep(0.2)


@pytest.mark.slow
def test_two_seeds_summed_up_and_a_stopped_command_resumed(synthetic_root, tmp_path):
    out = tmp_path / "seeds"
    args = [os.path.join(REPO, "tools", "train_net.py"), "--config-file", SYNTHETIC_CONFIG, "--seeds", "1", "2",
            "DATASETS.ROOT", synthetic_root, "OUTPUT_DIR", str(out), *QUICK, "SOLVER.MAX_EPOCH", "3",
            "SOLVER.ITERS_PER_EPOCH", "6", "SOLVER.CHECKPOINT_PERIOD", "1"]
    proc = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        wait_for(out / "seed_2" / "model_1e.pth", proc)  # seed 1 done and tested, seed 2 one epoch in
        proc.send_signal(signal.SIGTERM)
        output = proc.communicate(timeout=120)[0]
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, output[-3000:]
    assert (out / "seed_1" / "inference" / "model_final" / "synthetic_val" / "metrics.json").is_file()
    assert not (out / "seed_2" / "model_final.pth").exists()
    with open(out / "seeds.json") as f:
        assert "stopped" in json.load(f)["seeds"]["2"]["status"]
    kept = {p: os.stat(out / "seed_1" / p).st_mtime_ns
            for p in ("model_final.pth", "inference/model_final/synthetic_val/metrics.json")}

    again = run_tool("train_net", *args[1:])
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert {p: os.stat(out / "seed_1" / p).st_mtime_ns for p in kept} == kept  # not redone
    assert "seed 1: finished in" in again.stdout and "seed 2: training in" in again.stdout
    assert "resuming from" in (out / "seed_2" / "log.txt").read_text()
    assert "summary over seeds 1, 2" in again.stdout and "mean ± sample std" in again.stdout

    record = summary(out)
    assert record["seeds"] == [1, 2]
    rows = final_rows(record)
    assert set(rows) == set(metric_names())
    for name, row in rows.items():
        values = [row["values"]["1"], row["values"]["2"]]
        assert row["mean"] == pytest.approx(sum(values) / 2)
        assert row["std"] == pytest.approx(abs(values[0] - values[1]) / 2 ** 0.5)  # sample std of two values
        assert (row["min"], row["max"]) == (min(values), max(values))
    assert any(r["values"]["1"] != r["values"]["2"] for r in rows.values())  # the seed changes the run
    for seed in ("1", "2"):  # each value is the seed's own metrics.json
        with open(out / f"seed_{seed}" / "inference" / "model_final" / "synthetic_val" / "metrics.json") as f:
            assert json.load(f)["mIoU"] == pytest.approx(rows["mIoU"]["values"][seed])
    header = (out / "seeds_summary.csv").read_text().split("\n")[0]
    assert header == "model,dataset,metric,seeds,mean,std,min,max,seed_1,seed_2"

    # tan-test over the seed folders gives the same summary
    evaluated = tmp_path / "evaluated"
    test = run_tool("test_net", "--ckpt", str(out / "seed_1" / "model_final.pth"), str(out / "seed_2" / "model_final.pth"),
                    "OUTPUT_DIR", str(evaluated), "DATALOADER.NUM_WORKERS", "0", "MODEL.DEVICE", "cpu")
    assert test.returncode == 0, test.stdout[-3000:] + test.stderr[-3000:]
    tested = final_rows(summary(evaluated / "inference"))
    for name, row in rows.items():
        assert tested[name]["values"] == pytest.approx(row["values"]) and tested[name]["std"] == pytest.approx(row["std"])


@pytest.mark.slow
def test_the_slurm_path_with_submitits_local_executor(synthetic_root, tmp_path):
    out = tmp_path / "seeds"
    proc = run_tool("train_net", "--config-file", SYNTHETIC_CONFIG, "--seeds", "3", "4", "--launcher", "submitit-local",
                    "DATASETS.ROOT", synthetic_root, "OUTPUT_DIR", str(out), *QUICK, "SOLVER.MAX_EPOCH", "1",
                    "SOLVER.ITERS_PER_EPOCH", "2", "SOLVER.CHECKPOINT_PERIOD", "0")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert summary(out)["seeds"] == [3, 4] and set(final_rows(summary(out))) == set(metric_names())
    with open(out / "seeds.json") as f:
        status = json.load(f)
    assert status["launcher"] == "submitit-local" and {s["status"] for s in status["seeds"].values()} == {"trained"}
    assert any(name.endswith("_log.out") for name in os.listdir(out / "submitit"))  # submitit's own job logs
    for seed in ("3", "4"):
        assert "SEED: " + seed in (out / f"seed_{seed}" / "config.yml").read_text()


@pytest.mark.parametrize("extra,message", [
    (["--seeds", "1", "1"], "each seed once"),
    (["--seeds", "1", "SEED", "3"], "leave SEED out"),
    (["--seeds", "1", "--slurm", "partition=gpu"], "go with --launcher slurm"),
    (["--seeds", "1", "--launcher", "slurm", "--slurm", "partition"], "expected KEY=VALUE"),
    (["--launcher", "slurm"], "go with --seeds"),
    (["--seeds", "1", "--seeds-at-once", "0"], "at least 1"),
])
def test_bad_seed_arguments_are_refused_before_anything_runs(tmp_path, extra, message):
    with pytest.raises(TanError, match=message):
        train_main(["--config-file", SYNTHETIC_CONFIG, "OUTPUT_DIR", str(tmp_path / "never"), *extra])
    assert not (tmp_path / "never").exists()


def test_each_running_seed_gets_a_gpu_of_its_own_as_this_command_sees_them():
    from tan_apps.seeds.launcher import seed_gpus

    assert seed_gpus("auto", 2, None) == ["0", "1"]
    assert seed_gpus("cuda", 2, "2,3") == ["2", "3"]  # the command's own mask: physical GPUs 2 and 3
    assert seed_gpus("auto", 1, "GPU-5b2c, GPU-77aa") == ["GPU-5b2c"]  # UUIDs; torch saw one of them
    assert seed_gpus("cpu", 4, None) == [] and seed_gpus("auto", 0, None) == []
    assert seed_gpus("cuda:1", 2, None) == []  # the config names its GPU: left as it is


def test_the_summary_reads_only_the_configs_test_datasets(tmp_path):
    from tan_apps.seeds.launcher import summarize_folders

    for seed, value in ((1, 40.0), (2, 44.0)):
        for dataset, metric in (("synthetic_test", value), ("left_over", 99.0)):  # an earlier config's results
            folder = tmp_path / f"seed_{seed}" / "inference" / "model_final" / dataset
            folder.mkdir(parents=True)
            (folder / "metrics.json").write_text(json.dumps({"mIoU": metric, "num_queries": 3, "checkpoint": "x"}))
    rows = summarize_folders(str(tmp_path), {s: str(tmp_path / f"seed_{s}") for s in (1, 2)}, ["synthetic_test"])
    assert [(r["dataset"], r["metric"], r["mean"]) for r in rows] == [("synthetic_test", "mIoU", 42.0)]
    assert rows[0]["std"] == pytest.approx(8 ** 0.5)
