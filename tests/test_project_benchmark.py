"""A benchmark that lives outside the package (projects/near_moments): its annotation format, its
evaluator (its own figures and submission file) and its data come from the plug-in alone; it trains,
picks its best model by its own figure and tests with the stock tools, and nothing in tan/ names it."""
import csv
import json
import os
import re

import numpy as np
import pytest
import torch

from conftest import ONE_THREAD, REPO, run_main, run_tool

PROJECT = os.path.join(REPO, "projects", "near_moments")
CONFIG = os.path.join(PROJECT, "near_synthetic.yaml")
FIGURES = ("NEAR-R@1,0.5s", "NEAR-R@1,1s", "NEAR-R@1,2s")
SHORT = ["PLUGINS", repr([PROJECT]), "MODEL.DEVICE", "cpu", "SOLVER.MAX_EPOCH", "2", "SOLVER.MILESTONES", "(2,)",
         "SOLVER.TEST_PERIOD", "1", "SOLVER.LOG_PERIOD", "50"]


def near_figures(lines):
    """NEAR-R@1,{k}s computed here from predictions.jsonl: the first moment's start and end each within k s."""
    errors = [max(abs(p["moments"][0][0] - p["gt"][0]), abs(p["moments"][0][1] - p["gt"][1])) if p["moments"]
              else np.inf for p in lines]
    return {name: round(100.0 * float(np.mean(np.asarray(errors) <= k)), 2) for name, k in zip(FIGURES, (0.5, 1, 2))}


def read_lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def test_no_line_of_the_packages_names_the_benchmark():
    named = []
    for folder, _, files in [entry for package in ("tan", "tan_apps") for entry in os.walk(os.path.join(REPO, package))]:
        for name in (n for n in files if n.endswith(".py")):
            with open(os.path.join(folder, name)) as f:
                named += [f"{name}:{n}" for n, line in enumerate(f, 1) if re.search(r"\bnear[_-]", line, re.I)]
    assert not named, named


def test_the_evaluator_counts_a_moment_within_k_seconds_at_both_ends_and_a_query_without_one_as_a_miss(
        tmp_path):
    from tan.config.plugins import import_plugin
    from tan.evaluation import Prediction
    from tan.config.evaluators import EVALUATORS

    import_plugin(PROJECT)

    class Dataset:
        moments = np.array([[10.0, 20.0], [0.0, 5.0], [3.0, 9.0]], dtype=np.float32)
        qids = ["a", "b", "c"]

        def __len__(self):
            return 3

    evaluator = EVALUATORS.get("near_moments")(Dataset(), "toy")
    one = torch.tensor([True])
    evaluator.reset()
    evaluator.process({0: Prediction(torch.tensor([[10.4, 19.0]]), one, torch.tensor([0.9])),  # 0.4 and 1.0 s off
                       1: Prediction(torch.tensor([[1.5, 5.0]]), one, torch.tensor([0.8])),  # 1.5 s off
                       2: Prediction(torch.zeros(1, 2), torch.tensor([False]), torch.zeros(1))})  # no moment
    assert evaluator.evaluate() == {"NEAR-R@1,0.5s": 0.0, "NEAR-R@1,1s": 33.33, "NEAR-R@1,2s": 66.67}
    evaluator.write(str(tmp_path))
    with open(tmp_path / "toy_near_submission.csv") as f:
        assert list(csv.reader(f)) == [["qid", "start", "end", "score"], ["a", "10.4", "19.0", "0.9"],
                                       ["b", "1.5", "5.0", "0.8"], ["c"]]


@pytest.mark.slow
def test_the_benchmark_trains_and_tests_from_its_config_alone_with_its_own_figures_and_file(synthetic_root,
                                                                                              tmp_path):
    out = tmp_path / "out"
    # from the repository's root, where the config's own PLUGINS ("projects/near_moments") finds the package
    proc = run_tool("train_net", "--config-file", CONFIG, "DATASETS.ROOT", synthetic_root, "OUTPUT_DIR", str(out),
                    *SHORT[2:], cwd=REPO, env=ONE_THREAD)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    results = out / "inference" / "model_final" / "near_synthetic_test"
    metrics = json.loads((results / "metrics.json").read_text())
    lines = read_lines(results / "predictions.jsonl")
    assert {k: metrics[k] for k in FIGURES} == near_figures(lines)
    assert "R@1,IoU@0.5" in metrics  # the recall every labeled dataset reports, beside the benchmark's
    best = torch.load(out / "model_best.pth", weights_only=False)["best"]
    assert best["metric"] == "NEAR-R@1,1s" and best["dataset"] == "near_synthetic_val"
    with open(results / "near_synthetic_test_near_submission.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(lines) == metrics["num_queries"]
    assert [[float(r["start"]), float(r["end"])] for r in rows] == [p["moments"][0] for p in lines]
    assert rows[0]["qid"] == "syn_test_0000_0"
    log = (out / "log.txt").read_text()
    assert "NEAR: NEAR-R@1,0.5s" in log and "new best NEAR-R@1,1s on near_synthetic_val" in log

    # tan-test of the checkpoint: the plug-in comes back from the config the checkpoint stores
    again = tmp_path / "again"
    proc = run_tool("test_net", "--ckpt", str(out / "model_final.pth"), "DATASETS.ROOT", synthetic_root,
                    "OUTPUT_DIR", str(again), cwd=REPO, env=ONE_THREAD)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    tested = json.loads((again / "inference" / "model_final" / "near_synthetic_test" / "metrics.json").read_text())
    assert {k: tested[k] for k in FIGURES} == {k: metrics[k] for k in FIGURES}


@pytest.mark.slow
def test_a_config_adds_the_benchmark_s_evaluator_to_another_format_s_dataset_and_best_metric_follows(
        synthetic_root, tmp_path):
    base = ["DATASETS.ROOT", synthetic_root, "MODEL.DEVICE", "cpu", "SOLVER.MAX_EPOCH", "1", "SOLVER.MILESTONES",
            "(1,)", "SOLVER.TEST_PERIOD", "1", "PLUGINS", repr([PROJECT])]
    config = os.path.join(REPO, "configs", "2dtan_synthetic.yaml")
    # the figure of an evaluator the first validation dataset does not get: refused before training
    proc = run_main("train_net", "--config-file", config, *base, "OUTPUT_DIR", str(tmp_path / "refused"),
                    "TEST.BEST_METRIC", "NEAR-R@1,1s", env=ONE_THREAD)
    assert proc.returncode == 2
    assert "TEST.BEST_METRIC 'NEAR-R@1,1s' is not reported on 'synthetic_val'" in proc.stdout + proc.stderr
    # TEST.EVALUATORS gives every test dataset the evaluator: the figure is reported and picks the best model
    out = tmp_path / "added"
    proc = run_main("train_net", "--config-file", config, *base, "OUTPUT_DIR", str(out), "TEST.BEST_METRIC",
                    "NEAR-R@1,1s", "TEST.EVALUATORS", "['near_moments']", env=ONE_THREAD)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    results = out / "inference" / "model_final" / "synthetic_test"
    metrics = json.loads((results / "metrics.json").read_text())
    assert {k: metrics[k] for k in FIGURES} == near_figures(read_lines(results / "predictions.jsonl"))
    assert (results / "synthetic_test_near_submission.csv").is_file()


def test_an_unknown_evaluator_is_refused_naming_the_key_and_the_registered_ones(synthetic_root, tmp_path):
    # a fresh process: this one may hold the plug-in's registrations from the tests before
    proc = run_tool("train_net", "--config-file", os.path.join(REPO, "configs", "2dtan_synthetic.yaml"),
                    "DATASETS.ROOT", synthetic_root, "OUTPUT_DIR", str(tmp_path / "out"), "TEST.EVALUATORS",
                    "['near_moments']")
    assert proc.returncode == 2
    assert ("TEST.EVALUATORS: unknown evaluator 'near_moments'; registered: ego4d_nlq, mad, moment_detr, recall "
            "(a plug-in's evaluators need its module in PLUGINS)") in proc.stdout + proc.stderr
    assert not (tmp_path / "out" / "config.yml").exists()


def test_a_format_naming_an_evaluator_nobody_registers_is_refused_before_any_work(synthetic_root, tmp_path):
    plugin = tmp_path / "ghost_format.py"
    plugin.write_text("from tan.data.formats import register_format\n"
                      "from tan.data.formats.seconds import read\n\n"
                      "register_format('ghost_seconds', evaluators=('ghost',))(lambda *args: read(*args))\n")
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text("ghost_val:\n  annotations: synthetic/annotations/val.json\n"
                       "  features: synthetic/features/synthetic_features.hdf5\n  format: ghost_seconds\n")
    out = tmp_path / "out"
    proc = run_tool("train_net", "--config-file", os.path.join(REPO, "configs", "2dtan_synthetic.yaml"),
                    "DATASETS.ROOT", synthetic_root, "DATASETS.CATALOG", str(catalog), "DATASETS.VAL", "('ghost_val',)",
                    "PLUGINS", repr([str(plugin)]), "OUTPUT_DIR", str(out), "MODEL.DEVICE", "cpu")
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert ("dataset 'ghost_val': its annotation format 'ghost_seconds' is tested with evaluator 'ghost', which is "
            "not registered") in proc.stdout + proc.stderr
    assert not (out / "config.yml").exists()
