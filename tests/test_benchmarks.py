"""The real annotation files (../shared/data/annotations) and the stand-ins built from them."""
import json
import os
from collections import Counter

import numpy as np
import pytest

from tan.config import load_config
from tan.data import RunData, build_datasets
from tan.data.formats import load_annotations
from tan.standin import make_standin, write_charades_text_form

from conftest import REPO

SHARED = os.path.normpath(os.path.join(REPO, "..", "shared", "data", "annotations"))
needs_shared = pytest.mark.skipif(not os.path.isdir(SHARED), reason="../shared/data/annotations is absent")

# (file, format): (queries in the file, queries kept, what was dropped or clipped)
EXPECTED = {
    ("tacos/train.json", "tacos"): (9790, 9790, {"moment clipped to the video": 43}),
    ("tacos/val.json", "tacos"): (4436, 4436, {}),
    ("tacos/test.json", "tacos"): (4001, 4001, {"moment clipped to the video": 5}),
    ("activitynet/train.json", "seconds"): (37421, 37417, {"moment clipped to the video": 261, "start >= end": 4}),
    ("activitynet/val.json", "seconds"): (17505, 17505, {"moment clipped to the video": 134}),
    ("activitynet/test.json", "seconds"): (17031, 17031, {"moment clipped to the video": 111}),
    ("charades_sta/charades_train.json", "seconds"): (12404, 12404, {}),
    ("charades_sta/charades_test.json", "seconds"): (3720, 3720, {}),
}


@needs_shared
@pytest.mark.parametrize("name,fmt", sorted(EXPECTED))
def test_real_annotation_files_keep_and_drop_the_expected_queries(name, fmt):
    total, kept, dropped = EXPECTED[(name, fmt)]
    with open(os.path.join(SHARED, name)) as f:
        assert sum(len(v["sentences"]) for v in json.load(f).values()) == total
    queries, counts = load_annotations(os.path.join(SHARED, name), fmt)
    assert len(queries) == kept and dict(counts) == dropped
    assert all(0 <= q.start < q.end <= q.duration for q in queries)
    assert all(q.sentence == q.sentence.strip() for q in queries)


@needs_shared
def test_bad_activitynet_records_are_dropped_not_patched():
    # The reference reuses the previous record's values for a bad one; here it is gone.
    queries, _ = load_annotations(os.path.join(SHARED, "activitynet/train.json"), "seconds")
    with open(os.path.join(SHARED, "activitynet/train.json")) as f:
        data = json.load(f)
    bad = {(v, s) for v, info in data.items() for (a, b), s in zip(info["timestamps"], info["sentences"])
           if min(b, info["duration"]) <= max(a, 0)}
    assert len(bad) == 4
    kept = {(q.video, q.sentence) for q in queries}
    assert not any((v, s.strip()) in kept for v, s in bad)


@pytest.fixture(scope="module")
def charades_standin(tmp_path_factory):
    if not os.path.isdir(SHARED):
        pytest.skip("../shared/data/annotations is absent")
    root = str(tmp_path_factory.mktemp("standin"))
    make_standin("charades", SHARED, root, dim=16, clips_per_second=1.0)
    write_charades_text_form(root)
    return root


def charades_cfg(root, *opts):
    return load_config(os.path.join(REPO, "configs", "2dtan_16x16_pool_k5l8_charades.yaml"),
                       ["DATASETS.ROOT", root, "MODEL.TAN.FEATPOOL.INPUT_SIZE", "16", *opts])


def test_standin_loads_through_the_reference_config_at_full_scale(charades_standin):
    train, test = build_datasets(charades_cfg(charades_standin), ("charades_train", "charades_test"))
    assert (len(train), len(test)) == (12404, 3720)
    assert len(train.videos) == 5336 and train.unknown_words == 0
    item = train[0]
    assert item["feats"].shape == (256, 16) and item["query"].shape[1] == 300


def test_standin_moments_carry_their_sentence_signal(charades_standin):
    [train] = build_datasets(charades_cfg(charades_standin), ("charades_train",))
    inside, outside = [], []
    for index in range(0, 2000, 7):
        item = train[index]
        feats = train.features.read(train.videos[train.video_ids[index]])
        t = feats.shape[0]
        start, end = (item["moment"].numpy() / item["duration"] * t).astype(int)
        if end - start >= 2 and t - (end - start) >= 2:
            centre = feats.mean(axis=0)
            mask = np.zeros(t, bool)
            mask[start:end] = True
            inside.append(np.linalg.norm(feats[mask].mean(0) - centre))
            outside.append(np.linalg.norm(feats[~mask].mean(0) - centre))
    assert np.mean(inside) > 1.5 * np.mean(outside)


def test_charades_text_form_gives_the_same_queries_as_the_json(charades_standin):
    cfg = charades_cfg(charades_standin)
    json_set, txt_set = build_datasets(cfg, ("charades_test", "charades_txt_test"))
    assert len(json_set) == len(txt_set) == 3720
    np.testing.assert_allclose(np.sort(json_set.moments, axis=0), np.sort(txt_set.moments, axis=0), rtol=1e-6)
    assert Counter(json_set.sentences) == Counter(txt_set.sentences)


def test_charades_text_form_errors_and_bad_lines(tmp_path):
    (tmp_path / "a.txt").write_text("V1 0.0 3.5##a person opens a door.\nV2 1 2##no duration\nbroken line\n"
                                    "V1 5 1##reversed\n")
    (tmp_path / "c.csv").write_text("id,subject,length\nV1,x,10.0\n")
    queries, counts = load_annotations(str(tmp_path / "a.txt"), "charades_txt", str(tmp_path / "c.csv"))
    assert [(q.video, q.start, q.end, q.sentence) for q in queries] == [("V1", 0.0, 3.5, "a person opens a door.")]
    assert dict(counts) == {"video without a duration in the CSV": 1, "malformed line": 1, "start >= end": 1}
    with pytest.raises(Exception, match="Charades CSV file .*missing.csv.* not found"):
        load_annotations(str(tmp_path / "a.txt"), "charades_txt", str(tmp_path / "missing.csv"))


def test_word_vector_cache_is_reused_and_invalidated(charades_standin, caplog, tmp_path):
    import logging

    caplog.set_level(logging.INFO, logger="tan")
    cache = ["DATASETS.CACHE_DIR", str(tmp_path / "cache")]
    cfg = charades_cfg(charades_standin, "DATASETS.TEST", "('charades_test',)", "DATASETS.TRAIN", "()", *cache)
    data = RunData(cfg)
    vocabulary = data.text_input.vocabulary()
    assert "cached in" in caplog.text
    caplog.clear()
    assert data.text_input.vocabulary() is vocabulary and not caplog.text  # once per run
    # each run (a new RunData) reads the cache
    build_datasets(cfg, ("charades_test",))
    assert "read from the cache" in caplog.text
    caplog.clear()
    assert RunData(cfg).text_input.vocabulary().words == vocabulary.words
    assert "read from the cache" in caplog.text
    # another vocabulary (train sentences too) -> another cache entry
    caplog.clear()
    build_datasets(charades_cfg(charades_standin, *cache), ("charades_test",))
    assert "read from the cache" not in caplog.text and "cached in" in caplog.text
    assert len(os.listdir(tmp_path / "cache")) == 2
    # a changed source file -> read again
    glove = os.path.join(charades_standin, "glove", "glove.840B.300d.txt")
    os.utime(glove, (1, 1))
    caplog.clear()
    RunData(cfg).text_input.vocabulary()
    assert "read from the cache" not in caplog.text


def test_missing_word_vector_file_names_the_path_and_what_to_put_there(charades_standin):
    from tan.errors import TanError

    cfg = charades_cfg(charades_standin, "INPUT.WORD_VECTORS", "glove/nothing.txt")
    with pytest.raises(TanError, match="nothing.txt.*not found.*GloVe text file"):
        build_datasets(cfg, ("charades_test",))
