"""Feature sources (tan/data/features/sources.py) on small generated files: HDF5
in both layouts, folders of .npy / .npz, streams concatenated; what
MomentDataset makes of them; and queries with several ground-truth windows
(JSON lines) through the dataset, the evaluation and the loss."""
import json
from types import SimpleNamespace

import h5py
import numpy as np
import pytest
import torch

from tan.data.features import array_files
from tan.data.dataset import MomentDataset
from tan.data.features.sources import ConcatenatedFeatures, FolderFeatures, HDF5Features, open_features, open_source
from tan.data.features.rows import l2_normalize_rows, resample
from tan.data.text.words import Vocabulary
from tan.evaluation import evaluate_moments
from tan.errors import TanError
from tan.modeling.map2d import iou_loss as loss_module
from tan.modeling.map2d.iou_loss import ScaledIoULoss

# Different lengths and a width that is not a power of two, so that a swapped axis shows.
ARRAYS = {"v1": (7, 5), "v2": (12, 5), "v3": (1, 5)}


def features(shape, seed, dtype=np.float32):
    return np.random.default_rng(seed).normal(size=shape).astype(dtype)


@pytest.fixture
def arrays():
    return {video: features(shape, seed) for seed, (video, shape) in enumerate(ARRAYS.items())}


def write_hdf5(path, arrays, key=None):
    """Flat (a dataset per video), or grouped with the array under ``key``."""
    with h5py.File(path, "w") as f:
        for video, array in arrays.items():
            if key is None:
                f.create_dataset(video, data=array)
            else:
                f.create_group(video).create_dataset(key, data=array)
    return str(path)


def write_folder(folder, arrays, suffix=".npy", key="features"):
    folder.mkdir(exist_ok=True)
    for video, array in arrays.items():
        if suffix == ".npy":
            np.save(folder / f"{video}.npy", array)
        else:
            np.savez(folder / f"{video}.npz", **{key: array})
    return str(folder)


def assert_reads(source, arrays):
    assert source.videos() == set(arrays)
    assert source.shapes(sorted(arrays) + ["absent"]) == {v: a.shape for v, a in arrays.items()}
    for video, array in arrays.items():
        read = source.read(video)
        assert read.dtype == np.float32
        np.testing.assert_array_equal(read, array)


# ---------------------------------------------------------------- each reader

def test_hdf5_flat_layout(tmp_path, arrays):
    source = open_features(write_hdf5(tmp_path / "f.hdf5", arrays))
    assert isinstance(source, HDF5Features) and not source.grouped()
    assert_reads(source, arrays)


def test_hdf5_grouped_layout_with_the_default_and_a_custom_key(tmp_path, arrays):
    default = open_features(write_hdf5(tmp_path / "a.hdf5", arrays, key="c3d_features"))
    assert default.grouped()
    assert_reads(default, arrays)
    custom = open_features(write_hdf5(tmp_path / "b.hdf5", arrays, key="clip"), "clip")
    assert custom.grouped()
    assert_reads(custom, arrays)


def test_a_group_without_the_key_is_an_error_naming_the_key(tmp_path, arrays):
    source = open_features(write_hdf5(tmp_path / "f.hdf5", arrays, key="clip"))
    with pytest.raises(TanError, match=r"group 'v1' has no dataset 'c3d_features'.*feature_key.*\['clip'\]"):
        source.shapes(["v1"])
    with pytest.raises(TanError, match="no dataset 'c3d_features'"):
        source.read("v2")


def test_folder_of_npy(tmp_path, arrays):
    source = open_features(write_folder(tmp_path / "npy", arrays))
    assert isinstance(source, FolderFeatures)
    assert_reads(source, arrays)


def test_folder_of_npz_with_the_default_and_a_custom_key(tmp_path, arrays):
    assert_reads(open_features(write_folder(tmp_path / "a", arrays, ".npz")), arrays)
    assert_reads(open_features(write_folder(tmp_path / "b", arrays, ".npz", key="clip"), "clip"), arrays)
    with pytest.raises(TanError, match=r"v1.npz: no array 'features' \(catalog field 'feature_key'\).*\['clip'\]"):
        open_features(str(tmp_path / "b")).shapes(["v1"])


def test_a_folder_holding_both_npy_and_npz_of_one_video_is_an_error(tmp_path, arrays):
    folder = write_folder(tmp_path / "both", arrays)
    np.savez(tmp_path / "both" / "v2.npz", features=arrays["v2"])
    with pytest.raises(TanError, match="holds both v2.npy and v2.npz; keep one"):
        open_features(folder).videos()


@pytest.mark.parametrize("kind", ["hdf5", "npy", "npz"])
def test_float16_is_read_as_float32_and_read_stored_as_float16(tmp_path, arrays, kind):
    half = {video: array.astype(np.float16) for video, array in arrays.items()}
    path = write_hdf5(tmp_path / "f.hdf5", half) if kind == "hdf5" else write_folder(tmp_path / kind, half, f".{kind}")
    source = open_features(path)
    for video, array in half.items():
        read = source.read(video)
        assert read.dtype == np.float32
        np.testing.assert_array_equal(read, array.astype(np.float32))
        stored = source.read_stored(video)
        assert stored.dtype == np.float16 and stored.tobytes() == array.tobytes()
    source.close()
    assert source.read("v1").dtype == np.float32  # a read after close opens the file again


def test_a_folder_lists_its_file_formats_and_a_mixed_hdf5_file_is_grouped(tmp_path, arrays):
    folder = write_folder(tmp_path / "mixed", {"v1": arrays["v1"]})
    write_folder(tmp_path / "mixed", {"v2": arrays["v2"]}, ".npz")
    assert open_features(folder).formats() == {"npy", "npz"}
    assert open_features(write_folder(tmp_path / "npy", arrays)).formats() == {"npy"}
    path = write_hdf5(tmp_path / "mixed.hdf5", {"v1": arrays["v1"]})
    with h5py.File(path, "a") as f:
        f.create_group("v2").create_dataset("c3d_features", data=arrays["v2"])
    source = open_features(path)
    assert source.grouped()  # any group makes the file grouped; both layouts are read
    assert_reads(source, {"v1": arrays["v1"], "v2": arrays["v2"]})


def test_errors_name_the_option_that_sets_the_key_when_one_does(tmp_path, arrays):
    grouped = open_source(write_hdf5(tmp_path / "g.hdf5", arrays, key="clip"), key_field="--key")
    with pytest.raises(TanError, match=r"group 'v1' has no dataset 'c3d_features' \(the feature key: option --key\)"):
        grouped.read_stored("v1")
    npz = open_source(write_folder(tmp_path / "npz", arrays, ".npz", key="clip"), key_field="--key")
    with pytest.raises(TanError, match=r"v1.npz: no array 'features' \(option --key\); it holds \['clip'\]"):
        npz.read_stored("v1")


@pytest.mark.parametrize("kind", ["hdf5", "npy", "npz"])
def test_shapes_come_from_headers_without_reading_values(tmp_path, arrays, kind, monkeypatch):
    path = write_hdf5(tmp_path / "f.hdf5", arrays) if kind == "hdf5" else write_folder(tmp_path / kind, arrays,
                                                                                          f".{kind}")
    source = open_features(path)

    def no_values(*args, **kwargs):
        raise AssertionError("shapes read the values")

    monkeypatch.setattr(h5py.Dataset, "__getitem__", no_values)
    monkeypatch.setattr(array_files, "_read", no_values)  # every .npy/.npz value read goes through it
    assert source.shapes(sorted(arrays)) == {video: array.shape for video, array in arrays.items()}


# ---------------------------------------------------------------- streams

@pytest.fixture
def two_streams(tmp_path):
    """Stream a (HDF5, width 4) and stream b (folder of .npy, width 3): "same" is one row
    shorter in b, "far" 10 rows shorter (beyond the tolerance), "only_a" is not in b."""
    a = {"same": features((10, 4), 1), "far": features((30, 4), 2), "only_a": features((5, 4), 3)}
    b = {"same": features((9, 3), 4), "far": features((20, 3), 5)}
    return write_hdf5(tmp_path / "a.hdf5", a), write_folder(tmp_path / "b", b), a, b


def test_streams_are_normalised_resampled_and_concatenated(two_streams):
    path_a, path_b, a, b = two_streams
    source = open_features([path_a, path_b])
    assert isinstance(source, ConcatenatedFeatures)
    expected = np.concatenate([l2_normalize_rows(a["same"]), resample(l2_normalize_rows(b["same"]), 10)], axis=1)
    read = source.read("same")
    assert read.shape == (10, 7)
    np.testing.assert_allclose(read, expected, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(np.linalg.norm(read[:, :4], axis=1), 1, rtol=1e-5)
    assert source.shapes(["same"]) == {"same": (10, 7)}


def test_stream_lengths_beyond_the_tolerance_are_an_error_naming_the_video_and_lengths(two_streams):
    path_a, path_b, _, _ = two_streams
    with pytest.raises(TanError, match=r"video 'far': its feature streams have 30, 20 rows"):
        open_features([path_a, path_b]).shapes(["far"])
    # a looser tolerance takes them as the same clips
    assert open_features([path_a, path_b], tolerance=0.5).shapes(["far"]) == {"far": (30, 7)}


def test_a_video_missing_from_one_stream_is_not_in_the_streams(two_streams):
    path_a, path_b, _, _ = two_streams
    source = open_features([path_a, path_b])
    assert source.videos() == {"same", "far"}
    assert "only_a" not in source.shapes(["same", "only_a"])


# ---------------------------------------------------------------- through MomentDataset

VOCABULARY = Vocabulary({"cut": np.ones(3, np.float32), "onion": np.full(3, 2, np.float32)}, 3)


def annotation_file(tmp_path, videos):
    ann = {video: {"duration": 6.0, "timestamps": [[1, 3]], "sentences": ["cut the onion"]} for video in videos}
    path = tmp_path / "ann.json"
    path.write_text(json.dumps(ann))
    return str(path)


def test_a_width_mismatch_of_concatenated_streams_names_the_widths_and_the_config_key(tmp_path):
    wide = write_hdf5(tmp_path / "wide.hdf5", {"v": features((8, 64), 1)})
    narrow = write_folder(tmp_path / "narrow", {"v": features((8, 32), 2)})
    with pytest.raises(TanError, match=r"dataset 'd': video 'v' has features of shape \(8, 96\).*"
                                       r"streams of width 64 \+ 32.*expected \[T, 100\] "
                                       r"\(MODEL.TAN.FEATPOOL.INPUT_SIZE\)"):
        MomentDataset.from_files("d", annotation_file(tmp_path, ["v"]), [wide, narrow], "seconds", VOCABULARY, 4, 100,
                                 input_size_key="MODEL.TAN.FEATPOOL.INPUT_SIZE")
    ds = MomentDataset.from_files("d", annotation_file(tmp_path, ["v"]), [wide, narrow], "seconds", VOCABULARY, 4, 96)
    assert ds[0]["feats"].shape == (4, 96)


def test_a_video_missing_from_a_folder_is_dropped_and_counted(tmp_path):
    folder = write_folder(tmp_path / "f", {"here": features((6, 3), 1)}, ".npz")
    ds = MomentDataset.from_files("d", annotation_file(tmp_path, ["here", "gone"]), folder, "seconds", VOCABULARY, 4, 3)
    assert ds.videos == ["here"] and len(ds) == 1
    assert ds.dropped == {"video missing from the feature file": 1}


# ---------------------------------------------------------------- several windows per query

FIRST, SECOND = (0.0, 2.0), (6.0, 8.0)  # the two windows of query 0, far apart


@pytest.fixture
def windows_dataset(tmp_path):
    records = [
        {"qid": 0, "query": "cut the onion", "vid": "v", "duration": 10.0, "relevant_windows": [FIRST, SECOND]},
        {"qid": 1, "query": "cut", "vid": "v", "duration": 10.0, "relevant_windows": [[3, 5]]},
    ]
    (tmp_path / "ann.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    folder = write_folder(tmp_path / "f", {"v": features((20, 3), 1)})
    return MomentDataset.from_files("w", str(tmp_path / "ann.jsonl"), folder, "jsonl", VOCABULARY, 8, 3)


def test_a_dataset_keeps_every_window_padded_with_the_first(windows_dataset):
    ds = windows_dataset
    assert ds.moment_counts.tolist() == [2, 1]
    np.testing.assert_array_equal(ds.gt_moments, [[FIRST, SECOND], [[3, 5], [3, 5]]])
    np.testing.assert_array_equal(ds.moments, [FIRST, [3, 5]])
    assert ds[0]["gt_moments"].tolist() == [list(FIRST), list(SECOND)]


def test_a_prediction_of_the_second_window_is_a_hit(windows_dataset):
    ds = windows_dataset
    predicted = torch.tensor([[SECOND, FIRST], [[3.0, 5.0], [0.0, 1.0]]])  # [Q, k = 2, 2]
    filled = torch.ones(2, 2, dtype=torch.bool)
    every_window = evaluate_moments(predicted, filled, torch.from_numpy(ds.gt_moments))
    first_only = evaluate_moments(predicted, filled, torch.from_numpy(ds.moments))
    assert every_window["R@1,IoU@0.7"] == 100.0 and every_window["mIoU"] == 100.0
    assert first_only["R@1,IoU@0.7"] == 50.0  # query 0's top moment misses its first window


def loss_targets(monkeypatch, windows, duration=10.0, n=8):
    """The targets ScaledIoULoss hands to its BCE for one query, captured as they are."""
    captured = {}

    def capture(logits, targets):
        captured["targets"] = targets
        return torch.zeros(())

    monkeypatch.setattr(loss_module, "F", SimpleNamespace(binary_cross_entropy_with_logits=capture))
    mask = torch.ones(n, n, dtype=torch.bool).triu()
    ScaledIoULoss(0.3, 0.9, mask)(torch.zeros(1, n, n), torch.tensor([windows]), torch.tensor([duration]))
    return captured["targets"]


def test_loss_targets_of_two_windows_are_the_best_of_each_alone(monkeypatch):
    both = loss_targets(monkeypatch, [FIRST, (3.0, 9.0)])
    first = loss_targets(monkeypatch, [FIRST])
    second = loss_targets(monkeypatch, [(3.0, 9.0)])
    assert (first > 0).any() and (second > 0).any() and not torch.equal(first, second)
    assert torch.equal(both, torch.maximum(first, second))


def test_a_bad_window_is_left_out_and_its_query_kept(tmp_path):
    records = [{"qid": 0, "query": "cut", "vid": "v", "duration": 10.0, "relevant_windows": [[2, 5], [7], [9, 8]]},
               {"qid": 1, "query": "cut", "vid": "v", "duration": 10.0, "relevant_windows": [["a", 1]]}]
    (tmp_path / "ann.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    folder = write_folder(tmp_path / "f", {"v": features((20, 3), 1)})
    ds = MomentDataset.from_files("w", str(tmp_path / "ann.jsonl"), folder, "jsonl", VOCABULARY, 8, 3)
    assert len(ds) == 1 and ds.moment_counts.tolist() == [1] and ds.moments.tolist() == [[2.0, 5.0]]
    assert ds.dropped == {"window not two finite numbers": 2, "window with start >= end": 1, "no usable window": 1}


def test_a_stream_without_rows_drops_its_video_like_one_source(tmp_path):
    a = write_folder(tmp_path / "a", {"v": features((8, 2), 1), "empty": features((8, 2), 2)})
    b = write_folder(tmp_path / "b", {"v": features((8, 1), 3), "empty": features((0, 1), 4)})
    ds = MomentDataset.from_files("d", annotation_file(tmp_path, ["v", "empty"]), [a, b], "seconds", VOCABULARY, 4, 3)
    assert ds.videos == ["v"] and ds.dropped == {"video with no feature rows": 1}


@pytest.mark.parametrize("entry,message", [
    ({"annotations": ["a.jsonl"], "features": "f"}, "field 'annotations' must be a non-empty string, got"),
    ({"annotations": "a.json", "features": 5}, "field 'features' must be a non-empty string, or a non-empty list"),
    ({"annotations": "a.json", "features": ["f", ""]}, "field 'features' must be"),
    ({"annotations": "a.jsonl", "format": "jsonl", "features": "f", "text_features": ["t"]},
     "field 'text_features' must be a non-empty string"),
    ({"annotations": "a.json", "features": "f", "text_features": "t"}, "which the 'seconds' format does not give its queries"),
])
def test_catalog_fields_of_the_wrong_type_are_named(entry, message):
    from tan.data import DatasetCatalog
    with pytest.raises(TanError, match=message):
        DatasetCatalog("root").register("mine", entry)
