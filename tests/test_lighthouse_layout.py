"""Data in the Moment-DETR / lighthouse layout: JSON-lines annotations, two
feature streams in folders of per-video .npz files, and precomputed sentence
features per query, with no word-vector file, read as training reads them.

The built-in synthetic dataset is rewritten in that layout (its 128 feature
channels split into two streams of 96 and 32, one of them a row shorter,
float16; each sentence's rows are its words' vectors)."""
import json
import os

import h5py
import numpy as np
import pytest
import yaml

from tan.data.text.words import tokenize

from conftest import REPO, run_main

MMN_SYNTHETIC = os.path.join(REPO, "configs", "mmn_synthetic.yaml")
SPLITS = ("train", "val", "test")


def word_vectors(path):
    vectors = {}
    with open(path) as f:
        for line in f:
            word, *values = line.rstrip("\n").split(" ")
            vectors[word] = np.asarray(values, dtype=np.float32)
    return vectors


def write_lighthouse_layout(synthetic_root, root):
    """The synthetic dataset under ``root`` in lighthouse's layout; returns the catalog file."""
    source = os.path.join(synthetic_root, "synthetic")
    vectors = word_vectors(os.path.join(source, "word_vectors.txt"))
    for stream in ("clip", "slowfast", "text"):
        os.makedirs(os.path.join(root, stream))
    with h5py.File(os.path.join(source, "features", "synthetic_features.hdf5")) as h5:
        for video in h5:
            feats = h5[video][()]
            np.savez(os.path.join(root, "clip", f"{video}.npz"), features=feats[:, :96].astype(np.float16))
            # the second stream one row shorter, as extractors that round the clip count down give
            np.savez(os.path.join(root, "slowfast", f"{video}.npz"), features=feats[:-1, 96:].astype(np.float16))
    qid, catalog = 0, {}
    for split in SPLITS:
        with open(os.path.join(source, "annotations", f"{split}.json")) as f:
            annotations = json.load(f)
        lines = []
        for video, info in sorted(annotations.items()):
            for (start, end), sentence in zip(info["timestamps"], info["sentences"]):
                lines.append(json.dumps({"qid": qid, "query": sentence, "duration": info["duration"], "vid": video,
                                         "relevant_windows": [[start, end]]}))
                rows = [vectors[w] for w in tokenize(sentence) if w in vectors]
                np.savez(os.path.join(root, "text", f"qid{qid}.npz"),
                         last_hidden_state=np.stack(rows).astype(np.float16))
                qid += 1
        with open(os.path.join(root, f"{split}.jsonl"), "w") as f:
            f.write("\n".join(lines) + "\n")
        catalog[f"lh_{split}"] = {"annotations": f"{split}.jsonl", "format": "jsonl",
                                  "features": ["clip", "slowfast"], "text_features": "text"}
    with open(os.path.join(root, "catalog.yaml"), "w") as f:
        yaml.safe_dump(catalog, f)


@pytest.fixture(scope="module")
def lighthouse_root(synthetic_root, tmp_path_factory):
    root = str(tmp_path_factory.mktemp("lighthouse"))
    write_lighthouse_layout(synthetic_root, root)
    return root


def overrides(root, out, architecture):
    return ["DATASETS.ROOT", root, "DATASETS.CATALOG", "catalog.yaml", "DATASETS.TRAIN", "('lh_train',)",
            "DATASETS.VAL", "('lh_val',)", "DATASETS.TEST", "('lh_test',)", "INPUT.SENTENCE_FEATURES", "True",
            "INPUT.WORD_VECTORS", "no/such/file.txt", "OUTPUT_DIR", str(out), "MODEL.DEVICE", "cpu",
            f"MODEL.{architecture}.FEATPOOL.INPUT_SIZE", "128"]


@pytest.mark.slow
def test_the_checker_passes_the_lighthouse_layout(lighthouse_root, tmp_path):
    proc = run_main("check_data", "--config-file", MMN_SYNTHETIC, *overrides(lighthouse_root, tmp_path, "MMN"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "stream        clip (folder): 600 videos, width 96" in proc.stdout
    assert "stream        slowfast (folder): 600 videos, width 32" in proc.stdout
    assert "1781 kept, 0 dropped" in proc.stdout
    assert "1781 of 1781 queries (100.0%) have a file" in proc.stdout


# Learning from this layout (JSON-lines annotations, two streams one row apart, sentence features, no
# word-vector file) is tested on the QVHighlights stand-in, which has the same files for every model
# (tests/test_qvhighlights.py: each trains well past its untrained figure there).
