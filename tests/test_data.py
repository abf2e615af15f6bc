import json
import logging

import h5py
import numpy as np
import pytest
import torch

from tan.config import load_config
from tan.data import DatasetCatalog, RunData, SentenceEncoder, VideoSource, make_data_loader
from tan.data import formats as annotations_module
from tan.data.loaders import VAL_FALLBACK_WARNING
from tan.data.collate import BatchCollator
from tan.data.dataset import MomentDataset
from tan.data.features.rows import l2_normalize_rows, resample
from tan.data.samplers import ResumableDistributedSampler
from tan.data.text.words import Vocabulary, read_word_vectors, tokenize
from tan.errors import TanError

from conftest import SYNTHETIC_CONFIG


def direct_resample(feats, p):
    """docs/model.md §1 as written, one bucket at a time."""
    t = feats.shape[0]
    bounds = [min(int(torch.round(torch.tensor(k / p * t, dtype=torch.float32))), t - 1) for k in range(p + 1)]
    rows = []
    for k in range(p):
        s, e = bounds[k], bounds[k + 1]
        rows.append(feats[s:e].mean(axis=0) if s < e else feats[s])
    return np.stack(rows)


@pytest.mark.parametrize("t,p", [(100, 16), (10, 16), (16, 16), (257, 256), (3, 8)])
def test_resample_matches_the_bucket_definition(t, p):
    feats = np.random.default_rng(t).normal(size=(t, 6)).astype(np.float32)
    np.testing.assert_allclose(resample(feats, p), direct_resample(feats, p), rtol=1e-5, atol=1e-6)


def test_rows_are_l2_normalised_and_zero_rows_stay_zero():
    x = np.array([[3.0, 4.0], [0.0, 0.0]], dtype=np.float32)
    np.testing.assert_allclose(l2_normalize_rows(x), [[0.6, 0.8], [0.0, 0.0]])


def test_tokenize_lower_cases_and_splits_punctuation():
    assert tokenize(" The person's knife, rinsed.") == ["the", "person", "'s", "knife", ",", "rinsed", "."]


def test_glove_text_with_spaces_in_tokens(tmp_path):
    path = tmp_path / "glove.txt"
    path.write_text("the 1 2 3\n. . 4 5 6\nat name@domain.com 7 8 9\nunused 0 0 0\n")
    vectors = read_word_vectors(str(path), {"the", ". .", "at name@domain.com", "missing"}, 3)
    assert sorted(vectors) == [". .", "at name@domain.com", "the"]
    np.testing.assert_array_equal(vectors[". ."], [4, 5, 6])
    vocab = Vocabulary(vectors, 3)
    ids = vocab.encode(["the", "missing"])
    assert ids[1] == 0 and (vocab.matrix[0] == 0).all() and (vocab.matrix[ids[0]] == [1, 2, 3]).all()


def test_glove_errors_name_the_file(tmp_path):
    with pytest.raises(TanError, match="word-vector file .*nowhere.txt.*not found"):
        read_word_vectors(str(tmp_path / "nowhere.txt"), {"a"}, 3)
    bad = tmp_path / "bad.txt"
    bad.write_text("a 1 2\n")
    with pytest.raises(TanError, match="bad.txt:1: expected a word and 3 numbers"):
        read_word_vectors(str(bad), {"a"}, 3)


@pytest.fixture
def tacos_like(tmp_path):
    """A TACoS-format file (frames + fps) with rough edges, and group-layout features."""
    ann = {
        "s1.avi": {"num_frames": 300, "fps": 30.0, "timestamps": [[30, 90], [90, 30], [240, 400], [0, 60]],
                   "sentences": ["He cuts the pan.", "reversed", "runs past the end", "   "]},
        "s2.avi": {"num_frames": 150, "fps": 30.0, "timestamps": [[0, 60]], "sentences": ["not in features"]},
    }
    (tmp_path / "ann.json").write_text(json.dumps(ann))
    with h5py.File(tmp_path / "feats.hdf5", "w") as f:
        f.create_group("s1.avi").create_dataset("c3d_features", data=np.random.rand(40, 8).astype(np.float32))
    vocab = Vocabulary({"cuts": np.ones(4, np.float32), "pan": np.full(4, 2, np.float32),
                        "runs": np.full(4, 3, np.float32)}, 4)
    return tmp_path, vocab


def test_dataset_reads_frames_drops_and_clips_bad_records(tacos_like):
    root, vocab = tacos_like
    ds = MomentDataset.from_files("t", str(root / "ann.json"), str(root / "feats.hdf5"), "tacos", vocab, 16, 8)
    assert len(ds) == 2
    np.testing.assert_allclose(ds.moments, [[1.0, 3.0], [8.0, 10.0]])  # frames / fps, clipped to 10 s
    assert ds.dropped == {"start >= end": 1, "moment clipped to the video": 1, "empty sentence": 1,
                          "video missing from the feature file": 1}
    item = ds[0]
    assert item["feats"].shape == (16, 8) and item["query"].shape == (5, 4)
    assert ds.unknown_words == 3 + 3  # he, the, . / past, the, end


def test_videos_with_nan_or_inf_and_sentences_without_known_words_are_dropped(tmp_path):
    ann = {"good": {"duration": 4, "timestamps": [[0, 1], [1, 2]], "sentences": ["cut it", "zzz qqq"]},
           "nan": {"duration": 4, "timestamps": [[0, 1]], "sentences": ["cut"]},
           "inf": {"duration": 4, "timestamps": [[0, 1]], "sentences": ["cut"]},
           "one": {"duration": 4, "timestamps": [[0, 4]], "sentences": ["cut"]}}
    (tmp_path / "a.json").write_text(json.dumps(ann))
    with h5py.File(tmp_path / "f.hdf5", "w") as f:
        f.create_dataset("good", data=np.ones((5, 2), np.float32))
        f.create_dataset("nan", data=np.array([[1, np.nan]] * 3, np.float32))
        f.create_dataset("inf", data=np.array([[1, np.inf]] * 3, np.float32))
        f.create_dataset("one", data=np.ones((1, 2), np.float32))  # a one-clip video is fine
    vocab = Vocabulary({"cut": np.ones(3, np.float32)}, 3)
    ds = MomentDataset.from_files("d", str(tmp_path / "a.json"), str(tmp_path / "f.hdf5"), "seconds", vocab, 4, 2)
    assert len(ds) == 2 and sorted(ds.videos) == ["good", "one"]
    assert ds.dropped == {"video with NaN or infinite features": 2, "sentence without a known word": 1}
    assert torch.isfinite(ds[1]["feats"]).all() and ds[1]["feats"].shape == (4, 2)


def test_the_videos_left_out_are_named_not_only_counted(tmp_path, caplog):
    ann = {v: {"duration": 4, "timestamps": [[0, 1]], "sentences": ["cut"]}
           for v in ("good", "nan", "inf", "empty", "absent")}
    (tmp_path / "a.json").write_text(json.dumps(ann))
    with h5py.File(tmp_path / "f.hdf5", "w") as f:
        f.create_dataset("good", data=np.ones((5, 2), np.float32))
        f.create_dataset("nan", data=np.array([[1, np.nan]] * 3, np.float32))
        f.create_dataset("inf", data=np.array([[1, np.inf]] * 3, np.float32))
        f.create_dataset("empty", data=np.ones((0, 2), np.float32))
    vocab = Vocabulary({"cut": np.ones(3, np.float32)}, 3)
    with caplog.at_level(logging.WARNING, logger="tan"):
        ds = MomentDataset.from_files("d", str(tmp_path / "a.json"), str(tmp_path / "f.hdf5"), "seconds", vocab, 4, 2)
    assert ds.videos_left_out == {"video missing from the feature file": ["absent"],
                                  "video with NaN or infinite features": ["inf", "nan"],
                                  "video with no feature rows": ["empty"]}
    assert "dataset d: 2 videos with NaN or infinite features left out: inf, nan" in caplog.text
    assert "dataset d: 1 video with no feature rows left out: empty" in caplog.text
    assert "dataset d: 1 video missing from the feature file left out: absent" in caplog.text


def test_an_annotation_file_naming_a_video_twice_is_refused(tmp_path):
    path = tmp_path / "a.json"
    path.write_text('{"v1": {"duration": 4, "timestamps": [[0, 1]], "sentences": ["cut"]},\n'
                    ' "v1": {"duration": 4, "timestamps": [[1, 2]], "sentences": ["cut it"]}}')
    with pytest.raises(TanError, match=r"annotation file .*a.json.*: key 'v1' is given twice in one object"):
        annotations_module.load_annotations(str(path), "seconds")


@pytest.mark.parametrize("damage", ["truncated", "text", "empty", "other arrays", "wrong width", "other words",
                                    "a folder"])
def test_a_damaged_word_vector_cache_is_rebuilt_with_a_warning_whatever_the_damage(tmp_path, caplog, damage):
    from tan.data.text.words import cached_word_vectors

    glove = tmp_path / "glove.txt"
    glove.write_text("cut 1 2 3\nknife 4 5 6\n")
    cache_dir = tmp_path / "cache"
    first = cached_word_vectors(str(glove), {"cut", "knife"}, 3, str(cache_dir))
    [cache] = list(cache_dir.iterdir())
    if damage == "truncated":
        cache.write_bytes(cache.read_bytes()[:100])
    elif damage == "text":
        cache.write_text("not a cache\n")
    elif damage == "empty":
        cache.write_bytes(b"")
    elif damage == "other arrays":
        np.savez(cache, something=np.zeros(3))
    elif damage == "wrong width":
        np.savez(cache, words=np.asarray(["cut"]), vectors=np.zeros((1, 5), np.float32))
    elif damage == "other words":  # every word of the datasets would be unknown
        np.savez(cache, words=np.asarray(["saw", "x"]), vectors=np.zeros((2, 3), np.float32))
    else:
        cache.unlink()
        cache.mkdir()
    with caplog.at_level(logging.WARNING, logger="tan"):
        again = cached_word_vectors(str(glove), {"cut", "knife"}, 3, str(cache_dir))
    assert {w: v.tolist() for w, v in again.items()} == {w: v.tolist() for w, v in first.items()}
    assert f"word-vector cache {cache} is damaged" in caplog.text
    assert "pickle" not in caplog.text and "Traceback" not in caplog.text
    if damage != "a folder":  # the cache is written anew and read at the next start
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="tan"):
            cached_word_vectors(str(glove), {"cut", "knife"}, 3, str(cache_dir))
        assert "read from the cache" in caplog.text and "is damaged" not in caplog.text


@pytest.mark.parametrize("name,content,reason", [
    ("v.npy", b"0.1 0.2 0.3\n", "not a .npy file (it does not start with NumPy's header); write it with numpy.save"),
    ("v.npz", b"0.1 0.2 0.3\n", "not a .npz file (it does not start as a zip archive does); write it with "
                                "numpy.savez"),
    ("v.npy", b"", "the file is empty"),
])
def test_an_array_file_that_is_not_one_says_so_in_plain_words(tmp_path, name, content, reason):
    from tan.data.features.array_files import read_array

    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(TanError) as error:
        read_array(str(path), "features", "feature_key")
    assert str(error.value) == f"{str(path)!r} cannot be read: {reason}"


def test_feature_dimension_mismatch_is_a_clear_error(tacos_like):
    root, vocab = tacos_like
    with pytest.raises(TanError, match=r"video 's1.avi' has features of shape \(40, 8\) in HDF5 file '.*feats.hdf5'; expected \[T, 500\]"):
        MomentDataset.from_files("t", str(root / "ann.json"), str(root / "feats.hdf5"), "tacos", vocab, 16, 500)


def test_empty_dataset_after_filtering_is_a_clear_error(tmp_path):
    (tmp_path / "ann.json").write_text(json.dumps({"v": {"duration": 5, "timestamps": [[3, 1]], "sentences": ["x"]}}))
    with h5py.File(tmp_path / "f.hdf5", "w") as f:
        f.create_dataset("v", data=np.ones((4, 2), np.float32))
    with pytest.raises(TanError, match="no usable query"):
        MomentDataset.from_files("e", str(tmp_path / "ann.json"), str(tmp_path / "f.hdf5"), "seconds", Vocabulary({}, 3), 4, 2)


def test_collator_pads_queries_and_keeps_lengths():
    windows = [torch.tensor([[0.0, 1.0]]), torch.tensor([[0.5, 1.0], [1.5, 2.0]])]
    items = [{"feats": torch.ones(4, 2), "query": torch.ones(n, 3), "moment": w[0], "gt_moments": w,
              "duration": 2.0, "index": i} for i, (n, w) in enumerate(zip([2, 5], windows))]
    batch = BatchCollator()(items)
    assert batch["queries"].shape == (2, 5, 3) and batch["wordlens"].tolist() == [2, 5]
    # windows padded to the batch's most with copies of the query's own first window
    assert batch["gt_moments"].tolist() == [[[0.0, 1.0], [0.0, 1.0]], [[0.5, 1.0], [1.5, 2.0]]]
    assert batch["queries"][0, 2:].abs().sum() == 0 and batch["feats"].shape == (2, 4, 2)


def test_data_loaders_on_the_synthetic_dataset(synthetic_root):
    cfg = load_config(SYNTHETIC_CONFIG, ["DATASETS.ROOT", synthetic_root])
    loader = make_data_loader(cfg, is_train=True)
    batch = next(iter(loader))
    assert batch["feats"].shape == (32, 64, 128) and batch["queries"].shape[0] == 32
    assert batch["queries"].shape[2] == 300 and (batch["wordlens"] > 0).all()
    [val] = make_data_loader(cfg, is_train=False, is_for_period=True)
    [test] = make_data_loader(cfg, is_train=False)
    assert val.dataset.name == "synthetic_val" and test.dataset.name == "synthetic_test"
    assert len(test.dataset) > 400


def test_synthetic_dataset_is_deterministic(tmp_path):
    from tan_apps.synthetic.features import generate

    generate(str(tmp_path / "a"))
    generate(str(tmp_path / "b"))
    for rel in ["synthetic/annotations/train.json", "synthetic/word_vectors.txt"]:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes()
    with h5py.File(tmp_path / "a/synthetic/features/synthetic_features.hdf5") as fa, \
            h5py.File(tmp_path / "b/synthetic/features/synthetic_features.hdf5") as fb:
        assert sorted(fa) == sorted(fb)
        np.testing.assert_array_equal(fa["syn_test_0007"][()], fb["syn_test_0007"][()])


def test_a_dataset_registered_from_a_catalog_file(tmp_path, synthetic_root):
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(f"mine_test:\n  annotations: {synthetic_root}/synthetic/annotations/val.json\n"
                       f"  features: {synthetic_root}/synthetic/features/synthetic_features.hdf5\n")
    cfg = load_config(SYNTHETIC_CONFIG, ["DATASETS.ROOT", synthetic_root, "DATASETS.CATALOG", str(catalog),
                                         "DATASETS.TEST", "('mine_test',)"])
    [loader] = make_data_loader(cfg, is_train=False)
    assert loader.dataset.name == "mine_test" and len(loader.dataset) > 100
    assert "mine_test" in DatasetCatalog.from_config(cfg).names()
    # the file was read into that catalog only: nothing process-wide remembers it
    assert "mine_test" not in DatasetCatalog(synthetic_root).names()


def test_catalogs_are_independent_instances(tmp_path):
    for name in ("a", "b"):
        (tmp_path / f"{name}.yaml").write_text(f"only_{name}:\n  annotations: {name}.json\n  features: {name}.hdf5\n")
    first = DatasetCatalog(str(tmp_path), str(tmp_path / "a.yaml"))
    second = DatasetCatalog(str(tmp_path), str(tmp_path / "b.yaml"))
    assert "only_a" in first.names() and "only_a" not in second.names()
    assert "only_b" in second.names() and "only_b" not in first.names()
    entry = {"annotations": "x/ann.json", "features": "/abs/f.hdf5"}
    first.register("mine", entry)
    entry["features"] = "changed.hdf5"  # the catalog keeps its own copy
    assert first.get("mine") == {"annotations": str(tmp_path / "x/ann.json"), "features": "/abs/f.hdf5",
                                 "format": "seconds", "name": "mine"}
    assert "mine" not in second.names() and "mine" not in DatasetCatalog(str(tmp_path)).names()
    first.get("mine")["features"] = "edited"  # get hands out copies
    assert first.get("mine")["features"] == "/abs/f.hdf5"
    assert sorted(DatasetCatalog(str(tmp_path)).names()) == sorted(DatasetCatalog("/elsewhere").names())


def test_catalog_errors(tmp_path):
    with pytest.raises(TanError, match="catalog file .*nowhere.yaml.* not found"):
        DatasetCatalog(str(tmp_path), str(tmp_path / "nowhere.yaml"))
    (tmp_path / "bad.yaml").write_text("- a list\n")
    with pytest.raises(TanError, match="expected a mapping of dataset names"):
        DatasetCatalog(str(tmp_path), str(tmp_path / "bad.yaml"))
    with pytest.raises(TanError, match="missing fields \\['features'\\]"):
        DatasetCatalog(str(tmp_path)).register("x", {"annotations": "a.json"})
    with pytest.raises(TanError, match="format 'frames' unknown"):
        DatasetCatalog(str(tmp_path)).register("x", {"annotations": "a", "features": "f", "format": "frames"})


def test_a_dataset_registered_from_python_reaches_the_run(synthetic_root):
    cfg = load_config(SYNTHETIC_CONFIG, ["DATASETS.ROOT", synthetic_root, "DATASETS.TRAIN", "()",
                                         "DATASETS.VAL", "()", "DATASETS.TEST", "('py_test',)"])
    catalog = DatasetCatalog.from_config(cfg)
    catalog.register("py_test", {"annotations": "synthetic/annotations/val.json",
                                 "features": "synthetic/features/synthetic_features.hdf5"})
    [loader] = RunData(cfg, catalog).test_loaders(distributed=False)
    assert loader.dataset.name == "py_test" and len(loader.dataset) > 100
    with pytest.raises(TanError, match="unknown dataset 'py_test'"):
        RunData(cfg)


def count_parses(monkeypatch):
    """Calls of load_annotations per annotation file, as RunData makes them."""
    calls = {}
    real = annotations_module.load_annotations

    def counting(path, *args, **kwargs):
        calls[path] = calls.get(path, 0) + 1
        return real(path, *args, **kwargs)

    monkeypatch.setattr(annotations_module, "load_annotations", counting)
    return calls


def test_a_run_parses_each_annotation_file_once_and_builds_each_dataset_once(synthetic_root, monkeypatch):
    calls = count_parses(monkeypatch)
    cfg = load_config(SYNTHETIC_CONFIG, ["DATASETS.ROOT", synthetic_root])
    data = RunData(cfg)
    train = data.train_loader(distributed=False)
    [val] = data.val_loaders(distributed=False)
    [test] = data.test_loaders(distributed=False)
    assert data.train_loader(distributed=False) is train and data.test_loaders(distributed=False) == [test]
    assert data.dataset("synthetic_test") is test.dataset and data.dataset("synthetic_train") is train.dataset
    assert VideoSource(data).duration(test.dataset.videos[0]) > 0
    SentenceEncoder.from_config(cfg)(["the person opens the door"])
    assert sorted(calls.values()) == [1, 1, 1] and len(calls) == 3
    queries, dropped = data.queries("synthetic_val")
    assert len(queries) == len(val.dataset) and not dropped
    assert calls == {path: 1 for path in calls}


def test_validation_falls_back_to_the_test_loaders_with_one_warning(synthetic_root, monkeypatch, caplog):
    calls = count_parses(monkeypatch)
    caplog.set_level(logging.INFO, logger="tan")
    cfg = load_config(SYNTHETIC_CONFIG, ["DATASETS.ROOT", synthetic_root, "DATASETS.VAL", "()"])
    data = RunData(cfg)
    [val] = data.val_loaders(distributed=False)
    [test] = data.test_loaders(distributed=False)
    assert val is test and val.dataset.name == "synthetic_test"
    assert data.val_loaders(distributed=False) == [test]
    warnings = [r.getMessage() for r in caplog.records if "DATASETS.VAL is empty" in r.getMessage()]
    assert warnings == [VAL_FALLBACK_WARNING]
    assert sum("dataset synthetic_test:" in r.getMessage() for r in caplog.records) == 1
    assert sum("words found in" in r.getMessage() for r in caplog.records) == 1
    assert sorted(calls.values()) == [1, 1]  # train (for the vocabulary) and test


def test_parse_drops_reach_the_dataset_count_without_changing_the_parse(tacos_like):
    root, vocab = tacos_like
    parsed = annotations_module.load_annotations(str(root / "ann.json"), "tacos")
    before = dict(parsed[1])
    ds = MomentDataset.from_files("t", str(root / "ann.json"), str(root / "feats.hdf5"), "tacos", vocab, 16, 8, parsed=parsed)
    assert ds.dropped == {"start >= end": 1, "moment clipped to the video": 1, "empty sentence": 1,
                          "video missing from the feature file": 1}
    assert dict(parsed[1]) == before


@pytest.mark.parametrize("shuffle,replicas,batch", [(True, 1, 4), (True, 3, 5), (False, 2, 3)])
def test_a_resumed_sampler_continues_the_epoch_s_order(shuffle, replicas, batch):
    dataset = list(range(103))
    for rank in range(replicas):
        sampler = ResumableDistributedSampler(dataset, replicas, rank, shuffle, 7, batch)
        sampler.set_epoch(3)
        full = list(sampler)
        assert len(sampler) == len(full) == -(-103 // replicas)
        for k in (0, 1, 4):
            sampler.resume(3, k)
            assert list(sampler) == full[k * batch:] and len(sampler) == len(full) - k * batch
        sampler.set_epoch(3)  # the next epoch starts from its beginning again
        assert list(sampler) == full
        sampler.set_epoch(4)
        assert (list(sampler) != full) == shuffle


@pytest.mark.parametrize("size,replicas", [(103, 1), (103, 3), (64, 2), (5, 4)])
def test_seed_0_shuffles_as_distributed_sampler_does(size, replicas):
    """SEED 0 keeps the orders of torch's DistributedSampler (seeded 0 + epoch), the split between
    processes included: the runs and checkpoints made before each SEED had its own stream stay valid."""
    from torch.utils.data import DistributedSampler

    for rank in range(replicas):
        ours, torchs = (ResumableDistributedSampler(list(range(size)), replicas, rank, True, 0, 4),
                        DistributedSampler(list(range(size)), num_replicas=replicas, rank=rank, shuffle=True, seed=0))
        for epoch in (0, 1, 2, 7):
            ours.set_epoch(epoch)
            torchs.set_epoch(epoch)
            assert list(ours) == list(torchs)


def test_each_seed_draws_its_epochs_orders_from_a_stream_of_its_own():
    """Consecutive seeds share no epoch's order (DistributedSampler's seed + epoch gives SEED 2's first
    epoch SEED 1's second), and a seed's epochs all differ."""
    from tan.data.samplers import epoch_order_seed

    def orders(seed, epochs=range(1, 9)):
        sampler = ResumableDistributedSampler(list(range(50)), 1, 0, True, seed, 16)
        drawn = []
        for epoch in epochs:
            sampler.set_epoch(epoch)
            drawn.append(tuple(sampler))
        return drawn

    seen = {}
    for seed in range(0, 21):
        for epoch, order in zip(range(1, 9), orders(seed)):
            assert order not in seen, f"SEED {seed} epoch {epoch} repeats {seen.get(order)}"
            seen[order] = (seed, epoch)
    generator_seeds = {epoch_order_seed(seed, epoch) for seed in range(-50, 2000) for epoch in range(500)}
    assert len(generator_seeds) == 2050 * 500  # no two (seed, epoch) of a long sweep share a generator seed
    assert orders(3) == orders(3)  # and a seed's orders are its own every time


def test_prediction_inputs_without_configured_datasets(tmp_path):
    (tmp_path / "glove.txt").write_text("cut 1 2 3\nonion 4 5 6\n")
    np.save(tmp_path / "v.npy", np.ones((5, 3), np.float64))
    cfg = load_config(SYNTHETIC_CONFIG, ["DATASETS.ROOT", str(tmp_path), "DATASETS.TRAIN", "()",
                                         "DATASETS.VAL", "()", "DATASETS.TEST", "()",
                                         "INPUT.WORD_VECTORS", "glove.txt", "INPUT.PRE_QUERY_SIZE", "3"])
    data = RunData(cfg)
    assert data.names == []
    data.check_files()
    source = VideoSource(data)
    feats = source.features("", str(tmp_path / "v.npy"))
    assert feats.dtype == np.float32 and feats.shape == (5, 3)
    assert source.duration("v") is None
    with pytest.raises(TanError, match="in none of the configured feature files \\(none\\)"):
        source.features("v")
    with pytest.raises(TanError, match="give --video ID"):
        source.features("")
    [encoded] = SentenceEncoder.from_config(cfg)(["Cut the onion"])
    np.testing.assert_array_equal(encoded, [[1, 2, 3], [0, 0, 0], [4, 5, 6]])
    with pytest.raises(TanError, match="has no word with a word vector"):
        SentenceEncoder.from_config(cfg)(["zzz"])


def test_video_features_and_duration_from_the_configured_datasets(synthetic_root):
    cfg = load_config(SYNTHETIC_CONFIG, ["DATASETS.ROOT", synthetic_root])
    data = RunData(cfg)
    source = VideoSource(data)
    video = data.dataset("synthetic_test").videos[0]
    feats = source.features(video)
    assert feats.dtype == np.float32 and feats.ndim == 2 and feats.shape[1] == 128
    queries, _ = data.queries("synthetic_test")
    assert source.duration(video) == next(q.duration for q in queries if q.video == video)
    with pytest.raises(TanError, match="'nope' is in none of the configured feature files \\(.*synthetic_features"):
        source.features("nope")


def test_unknown_dataset_name_lists_the_known_ones(synthetic_root):
    cfg = load_config(SYNTHETIC_CONFIG, ["DATASETS.ROOT", synthetic_root, "DATASETS.TEST", "('tacos_tset',)"])
    with pytest.raises(TanError, match="unknown dataset 'tacos_tset'.*tacos_test"):
        make_data_loader(cfg, is_train=False)


def test_a_program_of_the_library_alone_finds_the_synthetic_generator_installed(tmp_path):
    """No tan_apps import: the generator comes from the installed package's entry point."""
    import subprocess
    import sys
    code = ("import sys; from tan.config import load_config; from tan.data.generated import write_configured; "
            f"write_configured(load_config({SYNTHETIC_CONFIG!r}, ['DATASETS.ROOT', {str(tmp_path)!r}])); "
            "assert 'tan_apps.synthetic.features' in sys.modules")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "synthetic" / "READY").is_file()


def test_a_generator_no_package_provides_is_named(tmp_path):
    from tan.data.generated import write_generated
    catalog = DatasetCatalog(str(tmp_path))
    with pytest.raises(TanError, match="'nowhere' are written on first use, but no imported module registers"):
        write_generated(catalog, [{"generator": "nowhere"}])
