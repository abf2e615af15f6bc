"""End-to-end runs of tools/train_net.py and tools/test_net.py."""
import json
import os
import re

import pytest
import torch

from tan.config import load_config

from conftest import REPO, SYNTHETIC_CONFIG, run_main, with_overrides

FAST = ["SOLVER.LOG_PERIOD", "10", "DATALOADER.NUM_WORKERS", "0", "MODEL.DEVICE", "cpu"]


def train_args(root, out, *extra):
    return ["--config-file", SYNTHETIC_CONFIG, *with_overrides(["DATASETS.ROOT", root, "OUTPUT_DIR", str(out), *FAST],
                                                                *extra)]


@pytest.fixture(scope="module")
def trained(synthetic_root, tmp_path_factory):
    """One short training run shared by the tests below (2 epochs)."""
    out = tmp_path_factory.mktemp("run") / "out"
    proc = run_main("train_net", *train_args(synthetic_root, out, "SOLVER.MAX_EPOCH", "2",
                                             "SOLVER.MILESTONES", "(1,)", "SOLVER.TEST_PERIOD", "1"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out, proc


def test_training_run_writes_the_documented_outputs(trained):
    out, proc = trained
    assert sorted(p for p in os.listdir(out) if p.endswith(".pth")) == ["model_1e.pth", "model_2e.pth",
                                                                          "model_best.pth", "model_final.pth"]
    assert (out / "last_checkpoint").read_text() == "model_final.pth"
    metrics = json.loads((out / "inference" / "model_final" / "synthetic_test" / "metrics.json").read_text())
    assert metrics["checkpoint"].endswith("model_final.pth")
    assert 0 <= metrics["R@1,IoU@0.5"] <= 100 and "mIoU" in metrics and "R@5,IoU@0.7" in metrics
    assert "results on synthetic_test" in proc.stdout and "R@1" in proc.stdout
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    train_lines = [r for r in lines if "loss" in r]
    assert {"eta_seconds", "epoch", "iter", "loss", "loss_avg", "lr", "time", "data_time"} <= set(train_lines[0])
    assert [r["lr"] for r in train_lines if r["epoch"] == 2][0] == pytest.approx(1e-4)  # milestone (1,)
    assert sum(1 for r in lines if r.get("dataset") == "synthetic_val") == 2  # TEST_PERIOD 1
    assert "eta:" in (out / "log.txt").read_text()


def test_saved_config_reloads_to_the_run_config(trained, synthetic_root):
    out, _ = trained
    saved = load_config(str(out / "config.yml"))
    expected = load_config(SYNTHETIC_CONFIG, ["DATASETS.ROOT", synthetic_root, "OUTPUT_DIR", str(out), *FAST,
                                              "SOLVER.MAX_EPOCH", "2", "SOLVER.MILESTONES", "(1,)",
                                              "SOLVER.TEST_PERIOD", "1"])
    assert saved == expected


@pytest.mark.slow
def test_second_run_does_not_train_again_and_reports_the_same_figures(trained, synthetic_root):
    out, first = trained
    before = json.loads((out / "inference" / "model_final" / "synthetic_test" / "metrics.json").read_text())
    records_before = (out / "metrics.jsonl").read_text()
    proc = run_main("train_net", *train_args(synthetic_root, out, "SOLVER.MAX_EPOCH", "2",
                                             "SOLVER.MILESTONES", "(1,)", "SOLVER.TEST_PERIOD", "1"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "nothing to train" in proc.stdout
    assert (out / "metrics.jsonl").read_text() == records_before  # no step was taken
    after = json.loads((out / "inference" / "model_final" / "synthetic_test" / "metrics.json").read_text())
    assert after == before


def test_test_net_evaluates_the_latest_checkpoint_like_training_did(trained, synthetic_root):
    out, _ = trained
    before = json.loads((out / "inference" / "model_final" / "synthetic_test" / "metrics.json").read_text())
    proc = run_main("test_net", "--config-file", SYNTHETIC_CONFIG, "DATASETS.ROOT", synthetic_root,
                    "OUTPUT_DIR", str(out), *FAST)
    assert proc.returncode == 0, proc.stderr[-3000:]
    after = json.loads((out / "inference" / "model_final" / "synthetic_test" / "metrics.json").read_text())
    assert after == before


def test_test_net_says_loudly_when_the_model_is_untrained(synthetic_root, tmp_path):
    proc = run_main("test_net", "--config-file", SYNTHETIC_CONFIG, "DATASETS.ROOT", synthetic_root,
                    "OUTPUT_DIR", str(tmp_path / "none"), *FAST)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "UNTRAINED" in proc.stdout + proc.stderr
    assert (tmp_path / "none" / "inference" / "untrained" / "synthetic_test" / "metrics.json").exists()


@pytest.mark.slow
def test_run_stopped_after_epoch_k_resumes_at_epoch_k_plus_1(trained, synthetic_root, tmp_path):
    src, _ = trained
    out = tmp_path / "resume"
    out.mkdir()
    # The state of a run stopped right after epoch 1's checkpoint.
    (out / "model_1e.pth").write_bytes((src / "model_1e.pth").read_bytes())
    (out / "last_checkpoint").write_text("model_1e.pth")
    proc = run_main("train_net", *train_args(synthetic_root, out, "SOLVER.MAX_EPOCH", "2", "SOLVER.MILESTONES",
                                             "(1,)", "SOLVER.TEST_PERIOD", "0"), "--skip-test")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "resuming from" in proc.stdout
    epochs = {json.loads(line)["epoch"] for line in (out / "metrics.jsonl").read_text().splitlines()}
    assert epochs == {2}  # only epoch 2 was trained
    assert torch.load(out / "model_final.pth", weights_only=False)["epoch"] == 3
    assert not (out / "inference").exists()  # --skip-test


@pytest.mark.slow
def test_diverging_loss_stops_with_a_critical_message_and_no_checkpoint(synthetic_root, tmp_path):
    out = tmp_path / "nan"
    proc = run_main("train_net", *train_args(synthetic_root, out, "SOLVER.LR", "1e30", "SOLVER.MAX_EPOCH", "1",
                                             "SOLVER.TEST_PERIOD", "0"))
    assert proc.returncode == 3
    assert "CRITICAL" in proc.stdout and "at iteration" in proc.stdout
    assert "The last good checkpoint is none (no checkpoint was saved yet)" in proc.stdout
    assert not any(p.endswith(".pth") for p in os.listdir(out))


def test_config_errors_fail_before_any_work(tmp_path):
    proc = run_main("train_net", "--config-file", SYNTHETIC_CONFIG, "OUTPUT_DIR", str(tmp_path / "x"),
                    "SOLVER.MAX_EPOHC", "3")
    assert proc.returncode == 2
    assert "SOLVER.MAX_EPOHC" in proc.stderr and "SOLVER.MAX_EPOCH" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "x").exists()


@pytest.mark.parametrize("override,message", [
    (["DATASETS.TEST", "('tacos_test',)"], r"dataset 'tacos_test': annotations file .*tacos/annotations/test.json"
                                           r".* not found"),
    (["INPUT.WORD_VECTORS", "nowhere.txt", "DATASETS.TEST", "('charades_test',)"], r"not found"),
    (["SOLVER.BATCH_SIZE", "0"], r"SOLVER.BATCH_SIZE: expected a positive integer, got 0"),
])
def test_bad_inputs_fail_with_a_message_and_leave_earlier_outputs_alone(trained, synthetic_root, override, message):
    out, _ = trained
    before = {name: (out / name).read_bytes() for name in ("config.yml", "last_checkpoint", "model_final.pth")}
    proc = run_main("train_net", *train_args(synthetic_root, out, *override))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr + proc.stdout
    assert re.search(message, proc.stderr + proc.stdout), proc.stderr + proc.stdout
    assert {name: (out / name).read_bytes() for name in before} == before


def test_missing_feature_file_is_named(synthetic_root, tmp_path):
    import shutil

    root = tmp_path / "root"
    shutil.copytree(synthetic_root, root)
    os.remove(root / "synthetic" / "features" / "synthetic_features.hdf5")
    (root / "synthetic" / "READY").write_text('{"version": 0}')  # would regenerate: keep the hole instead
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(f"holes_test:\n  annotations: {root}/synthetic/annotations/test.json\n"
                       f"  features: {root}/synthetic/features/synthetic_features.hdf5\n")
    proc = run_main("test_net", "--config-file", SYNTHETIC_CONFIG, "DATASETS.ROOT", str(root), "DATASETS.CATALOG",
                    str(catalog), "DATASETS.TEST", "('holes_test',)", "OUTPUT_DIR", str(tmp_path / "o"), *FAST)
    assert proc.returncode == 2
    assert re.search(r"features file .*synthetic_features.hdf5' not found", proc.stderr + proc.stdout)
    assert 'see docs/datasets.md, "Getting the data"' in proc.stderr + proc.stdout
    with open(os.path.join(REPO, "docs", "datasets.md")) as f:
        assert f.read().startswith("# Getting the data\n")  # the page the message points to exists
    assert not (tmp_path / "o").exists()  # nothing written before the check


def test_an_output_folder_that_cannot_be_created_is_a_clear_error(synthetic_root, tmp_path):
    (tmp_path / "file").write_text("not a folder")
    proc = run_main("train_net", *train_args(synthetic_root, tmp_path / "file" / "out"))
    assert proc.returncode == 2 and "OUTPUT_DIR" in proc.stderr and "cannot be created" in proc.stderr
