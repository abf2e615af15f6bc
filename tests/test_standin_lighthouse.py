"""The lighthouse-layout stand-ins (tools/make_standin.py --layout lighthouse): the
files the built-in *_lighthouse_* datasets read, lighthouse's naming, the
planted signal in both feature streams, and loading through configs/lighthouse."""
import json
import math
import os

import numpy as np
import pytest

from tan.config import load_config
from tan.data import RunData
from tan.data.catalog import builtin_entries
from tan_apps.standin import make_lighthouse_standin, make_standin
from tan.data.text.words import tokenize
from tan.errors import TanError

from conftest import ANNOTATIONS, REPO, real_annotations, run_tool

DIMS = {"clip": 64, "slowfast": 32, "text": 64}
VIDEOS = 40
KEY_ORDER = ["qid", "query", "duration", "vid", "relevant_windows"]


def build(root, benchmark="charades", seed=0, videos=VIDEOS):
    return make_lighthouse_standin(benchmark, ANNOTATIONS, str(root), DIMS, seed, videos)


@pytest.fixture(scope="module")
def charades(tmp_path_factory):
    root = tmp_path_factory.mktemp("lighthouse_charades")
    build(root)
    return str(root)


def entry(root, name):
    """The built-in catalog entry ``name`` with paths under ``root``."""
    e = builtin_entries()[name]
    return {"annotations": os.path.join(root, e["annotations"]),
            "features": [os.path.join(root, p) for p in e["features"]],
            "text_features": os.path.join(root, e["text_features"])}


def records(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def npz(path, key):
    with np.load(path) as data:
        assert list(data.files) == [key]
        return data[key]


def first_videos_queries(source, count):
    """Queries of the first ``count`` videos (by id) of a real annotation file."""
    data = real_annotations(source)
    return sum(len(data[v]["sentences"]) for v in sorted(data)[:count])


def test_charades_files_are_where_the_catalog_looks(charades):
    for split, source in (("train", "charades_train.json"), ("test", "charades_test.json")):
        e = entry(charades, f"charades_lighthouse_{split}")
        assert e["annotations"].endswith(f"lighthouse/data/charades/charades_{split}_release.jsonl")
        assert all(os.path.isdir(p) for p in e["features"] + [e["text_features"]])
        assert len(records(e["annotations"])) == first_videos_queries(f"charades_sta/{source}", VIDEOS)
    with open(os.path.join(charades, "charades_lighthouse_standin.json")) as f:
        summary = json.load(f)
    assert summary["videos"] == 2 * VIDEOS and summary["dims"] == DIMS and summary["layout"] == "lighthouse"
    assert summary["queries"] == sum(summary["queries_per_split"].values())


def test_charades_records_follow_lighthouse(charades):
    train = records(entry(charades, "charades_lighthouse_train")["annotations"])
    test = records(entry(charades, "charades_lighthouse_test")["annotations"])
    assert all(list(r) == KEY_ORDER for r in train + test)
    # integer qids, counted on from train into test
    assert [r["qid"] for r in train + test] == list(range(len(train) + len(test)))
    for r in train + test:
        assert all(0 <= s < e <= r["duration"] for s, e in r["relevant_windows"])
    assert len({r["vid"] for r in train}) == len({r["vid"] for r in test}) == VIDEOS


def test_streams_are_float16_with_lighthouse_lengths(charades):
    e = entry(charades, "charades_lighthouse_train")
    durations = {r["vid"]: r["duration"] for r in records(e["annotations"])}
    clip_dir, slowfast_dir = e["features"]
    differences = []
    for vid, duration in durations.items():
        clip, slowfast = npz(os.path.join(clip_dir, f"{vid}.npz"), "features"), \
            npz(os.path.join(slowfast_dir, f"{vid}.npz"), "features")
        assert clip.dtype == slowfast.dtype == np.float16
        assert clip.shape == (math.ceil(duration / 1.0), DIMS["clip"])  # Charades: 1 s clips
        assert slowfast.shape[1] == DIMS["slowfast"]
        differences.append(slowfast.shape[0] - clip.shape[0])
    assert set(differences) <= {-1, 0, 1} and len(set(differences)) > 1  # some differ: resampling is exercised


def test_sentence_features_repeat_a_word_with_the_same_row(charades):
    e = entry(charades, "charades_lighthouse_train")
    rows_of = {}
    for r in records(e["annotations"]):
        rows = npz(os.path.join(e["text_features"], f"qid{r['qid']}.npz"), "last_hidden_state")
        tokens = tokenize(r["query"])
        assert rows.dtype == np.float16 and rows.shape == (len(tokens) + 2, DIMS["text"])  # + start and end
        for token, row in zip(tokens, rows[1:-1].astype(np.float32)):
            rows_of.setdefault(token, []).append(row / np.linalg.norm(row))
    person = np.stack(rows_of["person"])
    assert len(person) > 10 and (person @ person[0]).min() > 0.95  # the same word, nearly the same row
    assert abs(float(rows_of["person"][0] @ rows_of["door"][0])) < 0.6  # another word, another row


def moment_contrast(feats, start, end):
    """|inside mean - video mean| / |outside mean - video mean| of rows start..end, or None when either
    side has fewer than 2 rows."""
    mask = np.zeros(len(feats), bool)
    mask[start:end] = True
    if not 2 <= mask.sum() <= len(feats) - 2:
        return None
    centre = feats.mean(0)
    return np.linalg.norm(feats[mask].mean(0) - centre) / np.linalg.norm(feats[~mask].mean(0) - centre)


def test_both_streams_carry_the_moment_signal(charades):
    e = entry(charades, "charades_lighthouse_train")
    for folder in e["features"]:
        contrasts = []
        for r in records(e["annotations"]):
            feats = npz(os.path.join(folder, f"{r['vid']}.npz"), "features").astype(np.float32)
            (start, end), = r["relevant_windows"]
            rows = len(feats) / r["duration"]
            contrasts.append(moment_contrast(feats, int(start * rows), int(end * rows)))
        contrasts = [c for c in contrasts if c is not None]
        assert len(contrasts) > 50 and np.mean(contrasts) > 1.5, folder


def test_same_seed_same_bytes_other_seed_other_features(charades, tmp_path):
    build(tmp_path / "again")
    build(tmp_path / "other", seed=1)
    e = builtin_entries()["charades_lighthouse_train"]
    vid = records(os.path.join(charades, e["annotations"]))[0]["vid"]
    files = [os.path.join(e["features"][0], f"{vid}.npz"), os.path.join(e["features"][1], f"{vid}.npz"),
             os.path.join(e["text_features"], "qid0.npz"), e["annotations"]]

    def read(root, name):
        with open(os.path.join(root, name), "rb") as f:
            return f.read()

    for name in files:
        assert read(charades, name) == read(tmp_path / "again", name), name
    assert read(charades, files[0]) != read(tmp_path / "other", files[0])
    assert read(charades, files[3]) == read(tmp_path / "other", files[3])  # the annotations do not depend on it


def test_loads_through_the_lighthouse_config(charades):
    cfg = load_config(os.path.join(REPO, "configs", "lighthouse", "2dtan_charades.yaml"),
                      ["MODEL.TAN.FEATPOOL.INPUT_SIZE", "96", "INPUT.PRE_QUERY_SIZE", "64", "DATASETS.ROOT", charades])
    data = RunData(cfg)
    train = data.dataset("charades_lighthouse_train")
    assert len(train) == first_videos_queries("charades_sta/charades_train.json", VIDEOS)
    item = train[0]
    assert item["feats"].shape == (256, 96) and item["query"].shape[1] == 64
    assert len(data.dataset("charades_lighthouse_test")) == first_videos_queries("charades_sta/charades_test.json",
                                                                                VIDEOS)


@pytest.mark.slow
def test_tacos_names_from_the_command_line(tmp_path):
    result = run_tool("make_standin", "--benchmark", "tacos", "--layout", "lighthouse", "--root", str(tmp_path),
                      "--videos", "5", "--dim-clip", "16", "--dim-slowfast", "8", "--dim-text", "16", timeout=120)
    assert result.returncode == 0, result.stderr
    for split in ("train", "val", "test"):
        e = entry(str(tmp_path), f"tacos_lighthouse_{split}")
        rows = records(e["annotations"])
        assert len({r["vid"] for r in rows}) == 5
        for r in rows:
            assert not r["vid"].endswith(".avi") and r["qid"].startswith(r["vid"] + "_")
            assert os.path.isfile(os.path.join(e["text_features"], f"{r['qid']}.npz"))  # TACoS: no "qid" prefix
        counts = {}
        for r in rows:  # "{vid}_{k}", k counting each video's queries from 0
            assert r["qid"] == f"{r['vid']}_{counts.get(r['vid'], 0)}"
            counts[r["vid"]] = counts.get(r["vid"], 0) + 1
        r = rows[0]
        clip = npz(os.path.join(e["features"][0], f"{r['vid']}.npz"), "features")
        assert clip.shape == (math.ceil(r["duration"] / 2.0), 16)  # TACoS: 2 s clips


def test_activitynet_has_train_and_val_and_loads(tmp_path):
    summary = build(tmp_path, "activitynet", videos=3)
    assert list(summary["queries_per_split"]) == ["train", "val"]
    cfg = load_config(os.path.join(REPO, "configs", "lighthouse", "mmn_activitynet.yaml"),
                      ["MODEL.MMN.FEATPOOL.INPUT_SIZE", "96", "INPUT.PRE_QUERY_SIZE", "64",
                       "DATASETS.ROOT", str(tmp_path)])
    val = RunData(cfg).dataset("activitynet_lighthouse_val")
    assert len(val) == summary["queries_per_split"]["val"] == first_videos_queries("activitynet/val.json", 3)
    train = records(entry(str(tmp_path), "activitynet_lighthouse_train")["annotations"])
    assert min(r["qid"] for r in records(entry(str(tmp_path), "activitynet_lighthouse_val")["annotations"])) \
        == len(train)


@pytest.mark.parametrize("name", ["2dtan_charades", "mmn_charades", "2dtan_tacos", "mmn_tacos",
                                  "2dtan_activitynet", "mmn_activitynet"])
def test_lighthouse_configs_load(name):
    cfg = load_config(os.path.join(REPO, "configs", "lighthouse", f"{name}.yaml"))
    assert cfg.INPUT.SENTENCE_FEATURES and cfg.INPUT.PRE_QUERY_SIZE == 512
    assert all("_lighthouse_" in n for n in cfg.DATASETS.TRAIN + cfg.DATASETS.VAL + cfg.DATASETS.TEST)


def test_videos_option_of_the_reference_layout(tmp_path):
    make_standin("charades", ANNOTATIONS, str(tmp_path), dim=8, clips_per_second=1.0, videos_per_split=3)
    with open(tmp_path / "charades_sta" / "annotations" / "charades_test.json") as f:
        assert len(json.load(f)) == 3
    with open(tmp_path / "charades_standin.json") as f:
        assert json.load(f)["videos"] == 6


def test_bad_arguments_are_refused(tmp_path):
    with pytest.raises(TanError, match="unknown benchmark 'nope'"):
        make_lighthouse_standin("nope", ANNOTATIONS, str(tmp_path))
    with pytest.raises(TanError, match="slowfast dimension: expected a positive integer, got 0"):
        make_lighthouse_standin("charades", ANNOTATIONS, str(tmp_path), {"slowfast": 0})
    with pytest.raises(TanError, match="videos per split: expected a positive integer"):
        make_lighthouse_standin("charades", ANNOTATIONS, str(tmp_path), videos_per_split=0)
    result = run_tool("make_standin", "--benchmark", "charades", "--layout", "lighthouse", "--root", str(tmp_path),
                      "--dim", "16", timeout=120)
    assert result.returncode == 2 and "--dim and --clips-per-second are for --layout reference" in result.stderr
    assert not os.listdir(tmp_path)
