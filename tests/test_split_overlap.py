"""Split hygiene: a planted overlap between training and evaluation data is reported by tan-check-data
and warned about once when training starts; the shipped configs' splits have none."""
import functools
import glob
import json
import os

import numpy as np
import pytest
import yaml

from tan.config import load_config
from tan.data import RunData
from tan.data.formats import load_annotations
from tan.data.overlap import run_overlaps, sentence_key, split_overlap
from tan.data.formats.common import Query

from conftest import ANNOTATIONS, REPO, SYNTHETIC_CONFIG, run_main

# where each reference-layout built-in dataset's annotation file comes from in data/annotations
SOURCES = {"tacos": "tacos/{split}.json.gz", "activitynet": "activitynet/{split}.json.gz",
           "charades": "charades_sta/charades_{split}.json.gz"}


def q(video, sentence):
    return Query(video, 30.0, 1.0, 5.0, sentence)


def test_sentences_compare_without_case_spaces_and_full_stop():
    assert sentence_key("  The person  opens the door. ") == sentence_key("the person opens the door")


def test_overlap_of_two_query_lists():
    trained = [q("a", "He cuts the onion."), q("b", "she opens the door")]
    evaluated = [q("b", "She opens the door"), q("c", "he cuts the onion"), q("d", "something new")]
    found = split_overlap("train", "test", trained, evaluated)
    assert found.videos == ["b"] and found.queries == 1 and found.query_examples == [("b", "She opens the door")]
    # the two sentences recur ("the door" on b is also a shared query); three distinct evaluation sentences
    assert (found.sentences, found.evaluated_sentences) == (2, 3)
    assert found.overlaps
    clean = split_overlap("train", "test", trained, [q("c", "he cuts the onion")])
    assert not clean.overlaps and clean.sentences == 1 and clean.describe() == []


@pytest.fixture
def planted(tmp_path):
    """A catalog of three JSON-lines splits: "leaky" shares video v3 (one of its queries word for word)
    with "train"; "clean" shares only a generic sentence, on a video of its own."""
    root = tmp_path / "data"
    (root / "clip").mkdir(parents=True)
    (root / "text").mkdir()
    rng = np.random.default_rng(0)
    splits = {"train": [("v0", "a man opens the door"), ("v1", "the dog runs"), ("v2", "she sings"),
                        ("v3", "he cuts the onion")],
              "leaky": [("v3", "He cuts the onion."), ("v3", "he washes the knife"), ("v4", "a man opens the door")],
              "clean": [("v5", "a man opens the door"), ("v6", "they dance")]}
    qid, catalog = 0, {}
    for split, queries in splits.items():
        lines = []
        for video, sentence in queries:
            lines.append(json.dumps({"qid": qid, "query": sentence, "vid": video, "duration": 20.0,
                                     "relevant_windows": [[2.0, 6.0]]}))
            np.savez(root / "text" / f"qid{qid}.npz", last_hidden_state=rng.normal(size=(5, 8)).astype(np.float16))
            np.savez(root / "clip" / f"{video}.npz", features=rng.normal(size=(20, 8)).astype(np.float16))
            qid += 1
        (root / f"{split}.jsonl").write_text("\n".join(lines) + "\n")
        catalog[f"planted_{split}"] = {"annotations": f"{split}.jsonl", "format": "jsonl", "features": "clip",
                                       "text_features": "text"}
    (root / "catalog.yaml").write_text(yaml.safe_dump(catalog))
    return root


def planted_options(root, test):
    return ["DATASETS.ROOT", str(root), "DATASETS.CATALOG", "catalog.yaml", "DATASETS.TRAIN", "('planted_train',)",
            "DATASETS.VAL", "()", "DATASETS.TEST", f"('planted_{test}',)", "INPUT.SENTENCE_FEATURES", "True",
            "INPUT.PRE_QUERY_SIZE", "8", "MODEL.TAN.FEATPOOL.INPUT_SIZE", "8", "INPUT.WORD_VECTORS", "none.txt"]


@pytest.mark.slow
def test_the_checker_reports_a_planted_overlap(planted, tmp_path):
    report = tmp_path / "report.json"
    proc = run_main("check_data", "--config-file", SYNTHETIC_CONFIG, "--json", str(report),
                    *planted_options(planted, "leaky"))
    assert proc.returncode == 0, proc.stdout + proc.stderr  # reported, not fatal
    assert "planted_train / planted_leaky: OVERLAP" in proc.stdout
    assert "1 videos of planted_leaky are also in planted_train: v3" in proc.stdout
    assert "1 queries of planted_leaky (same video, same sentence)" in proc.stdout
    (found,) = json.loads(report.read_text())["overlaps"]
    assert found["videos"] == ["v3"] and found["queries"] == 1 and found["overlaps"] is True
    assert (found["sentences"], found["evaluated_sentences"]) == (2, 3)

    proc = run_main("check_data", "--config-file", SYNTHETIC_CONFIG, *planted_options(planted, "clean"))
    assert proc.returncode == 0 and "planted_train / planted_clean: no shared video or query" in proc.stdout
    assert "1 of 2 distinct sentences also occur in training" in proc.stdout


@pytest.mark.slow
def test_training_warns_once_at_start(planted, tmp_path):
    out = tmp_path / "run"
    proc = run_main("train_net", "--config-file", SYNTHETIC_CONFIG, "--skip-test", *planted_options(planted, "leaky"),
                    "OUTPUT_DIR", str(out), "MODEL.DEVICE", "cpu", "SOLVER.MAX_EPOCH", "1", "SOLVER.TEST_PERIOD", "0",
                    "DATALOADER.NUM_WORKERS", "0", "MODEL.TAN.NUM_CLIPS", "4", "MODEL.TAN.FEAT2D.POOLING_COUNTS", "[3]",
                    "INPUT.NUM_PRE_CLIPS", "8", "MODEL.TAN.FEATPOOL.KERNEL_SIZE", "2", "SOLVER.BATCH_SIZE", "2")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    log = (out / "log.txt").read_text()
    assert log.count("training and evaluation data overlap") == 1
    assert "1 videos of planted_leaky are also in planted_train: v3" in log


def shipped_configs():
    """The shipped configs of benchmarks whose real annotation files data/annotations holds (QVHighlights',
    Ego4D NLQ's and MAD's are generated stand-ins here: tests/test_ego4d_nlq.py and tests/test_mad.py
    check the last two)."""
    return sorted(os.path.relpath(p, os.path.join(REPO, "configs")) for pattern in ("*.yaml", "lighthouse/*.yaml")
                  for p in glob.glob(os.path.join(REPO, "configs", pattern))
                  if not any(generated in p for generated in ("qvhighlight", "ego4d_nlq", "_mad")))


@functools.lru_cache(maxsize=None)  # each real file parsed once for all the configs
def real_split(name):
    """The real queries of a shipped dataset name, whatever layout it reads (reference JSON, microsoft's
    text files, lighthouse's JSON lines: each is converted from the same split), from data/annotations."""
    benchmark = next(b for b in SOURCES if b in name)
    split = name.rpartition("_")[2]
    source = os.path.join(ANNOTATIONS, SOURCES[benchmark].format(split=split))
    return tuple(load_annotations(source, "tacos" if benchmark == "tacos" else "seconds")[0])


@pytest.mark.slow
@pytest.mark.parametrize("config", shipped_configs())
def test_the_shipped_configs_splits_do_not_overlap(config, synthetic_root):
    cfg = load_config(os.path.join(REPO, "configs", config), ["DATASETS.ROOT", synthetic_root])
    evaluated = list(dict.fromkeys(list(cfg.DATASETS.VAL) + list(cfg.DATASETS.TEST)))
    if all(n.startswith("synthetic") for n in list(cfg.DATASETS.TRAIN) + evaluated):
        found = run_overlaps(RunData(cfg))  # the run's own reading of the generated files
    else:
        found = [split_overlap(t, e, real_split(t), real_split(e), same_file=t == e)
                 for t in cfg.DATASETS.TRAIN for e in evaluated]
    assert found and not [o.describe() for o in found if o.overlaps]
