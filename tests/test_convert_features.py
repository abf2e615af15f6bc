"""tan-convert-features (tan_apps/converters/features.py, tools/convert_features.py):
round trips bit for bit, dtypes, the command line and its errors, atomic
replacement, and the same metrics from a converted copy of a dataset."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys

import h5py
import numpy as np
import pytest

from tan_apps.converters import features as convert
from tan_apps.converters.features import convert_features
from tan.data.features.sources import FolderFeatures, HDF5Features, open_features
from tan.errors import TanError

from conftest import run_main
from golden import settings as golden
from test_feature_sources import write_hdf5

SHAPES = {"v_a": (7, 6), "v_b": (12, 6), "v_c": (1, 6), "v.d.mp4": (30, 6)}


def bits(array):
    """The array's bytes, dtype and shape: equal only for a bit-identical copy (NaN payloads, -0.0)."""
    return array.dtype.str, array.shape, np.ascontiguousarray(array).tobytes()


@pytest.fixture
def arrays():
    """Random rows with the values a careless copy changes: -0.0, a subnormal, a NaN with a payload, inf."""
    rng = np.random.default_rng(0)
    made = {video: rng.normal(size=shape).astype(np.float32) for video, shape in SHAPES.items()}
    special = made["v_b"]
    special[0, :4] = [-0.0, np.float32(1e-45), np.inf, -np.inf]
    special[1, 0] = np.uint32(0x7FC00123).view(np.float32)
    return made


def read_hdf5(path, key=None):
    """{video: array as stored}, and the layout."""
    with h5py.File(path, "r") as f:
        grouped = {isinstance(node, h5py.Group) for node in f.values()}
        assert len(grouped) == 1, "one layout for every video"
        if grouped == {True}:
            return {v: f[v][key][()] for v in f}, "grouped"
        return {v: f[v][()] for v in f}, "flat"


def read_folder(folder, key="features"):
    """{video: array as stored}, and the suffixes."""
    out, suffixes = {}, set()
    for name in os.listdir(folder):
        video, suffix = os.path.splitext(name)
        suffixes.add(suffix)
        if suffix == ".npy":
            out[video] = np.load(os.path.join(folder, name))
        else:
            with np.load(os.path.join(folder, name)) as data:
                assert data.files == [key]
                out[video] = data[key]
    return out, suffixes


def assert_same_bits(got, expected):
    assert sorted(got) == sorted(expected)
    for video in expected:
        assert bits(got[video]) == bits(expected[video]), video


def listing(folder):
    return sorted(os.listdir(folder))


# ---------------------------------------------------------------- round trips

def test_flat_hdf5_to_npz_folder_and_back_is_bit_identical(tmp_path, arrays):
    src = write_hdf5(tmp_path / "f.hdf5", arrays)
    summary = convert_features(src, str(tmp_path / "folder"), file_format="npz")
    folder, suffixes = read_folder(tmp_path / "folder")
    assert suffixes == {".npz"}
    assert_same_bits(folder, arrays)
    assert summary.videos == 4 and summary.dims == (6,) and summary.lengths == (1, 9.5, 30)
    assert summary.dtypes == ("float32",) and summary.bytes_written > 4 * 4 * 6

    convert_features(str(tmp_path / "folder"), str(tmp_path / "back.hdf5"))
    back, layout = read_hdf5(tmp_path / "back.hdf5")
    assert layout == "flat"
    assert_same_bits(back, arrays)
    assert listing(tmp_path) == ["back.hdf5", "f.hdf5", "folder"]  # no temporaries left


def test_grouped_hdf5_to_npy_folder_and_back_keeps_the_layout(tmp_path, arrays):
    src = write_hdf5(tmp_path / "g.hdf5", arrays, key="c3d_features")
    convert_features(src, str(tmp_path / "folder"), file_format="npy")
    folder, suffixes = read_folder(tmp_path / "folder")
    assert suffixes == {".npy"}
    assert_same_bits(folder, arrays)
    convert_features(str(tmp_path / "folder"), str(tmp_path / "back.hdf5"), layout="grouped")
    back, layout = read_hdf5(tmp_path / "back.hdf5", "c3d_features")
    assert layout == "grouped"
    assert_same_bits(back, arrays)


def test_custom_keys_in_and_out(tmp_path, arrays):
    src = write_hdf5(tmp_path / "g.hdf5", arrays, key="clip")
    convert_features(src, str(tmp_path / "folder"), key="clip", file_format="npz", out_key="feats")
    assert_same_bits(read_folder(tmp_path / "folder", "feats")[0], arrays)
    # a grouped HDF5 file keeps its group key by default, a folder of .npz its key
    convert_features(src, str(tmp_path / "copy.hdf5"), key="clip")
    assert_same_bits(read_hdf5(tmp_path / "copy.hdf5", "clip")[0], arrays)
    convert_features(str(tmp_path / "folder"), str(tmp_path / "npz2"), key="feats")
    assert_same_bits(read_folder(tmp_path / "npz2", "feats")[0], arrays)
    # any name works for an .npz array, even np.savez's own argument names
    convert_features(src, str(tmp_path / "odd"), key="clip", file_format="npz", out_key="file")
    assert_same_bits(read_folder(tmp_path / "odd", "file")[0], arrays)


def test_hdf5_relayout_and_folder_format_change(tmp_path, arrays):
    src = write_hdf5(tmp_path / "f.hdf5", arrays)
    convert_features(src, str(tmp_path / "g.hdf5"), layout="grouped")
    assert read_hdf5(tmp_path / "g.hdf5", "c3d_features")[1] == "grouped"
    convert_features(str(tmp_path / "g.hdf5"), str(tmp_path / "f2.hdf5"), layout="flat")
    back, layout = read_hdf5(tmp_path / "f2.hdf5")
    assert layout == "flat"
    assert_same_bits(back, arrays)
    convert_features(src, str(tmp_path / "npy"))  # .npy by default
    convert_features(str(tmp_path / "npy"), str(tmp_path / "npz"), file_format="npz")
    npz, suffixes = read_folder(tmp_path / "npz")
    assert suffixes == {".npz"}
    assert_same_bits(npz, arrays)


def test_float16_output(tmp_path, arrays):
    finite = {video: np.nan_to_num(array, posinf=1.0, neginf=-1.0) for video, array in arrays.items()}
    src = write_hdf5(tmp_path / "f.hdf5", finite)
    summary = convert_features(src, str(tmp_path / "half"), dtype="float16")
    assert summary.dtypes == ("float16",)
    half, _ = read_folder(tmp_path / "half")
    assert_same_bits(half, {video: array.astype(np.float16) for video, array in finite.items()})
    read = open_features(str(tmp_path / "half")).read("v_a")  # the dataset reads it as float32
    assert read.dtype == np.float32 and np.array_equal(read, finite["v_a"].astype(np.float16).astype(np.float32))
    # and back to float32 in an HDF5 file
    convert_features(str(tmp_path / "half"), str(tmp_path / "f32.hdf5"), dtype="float32")
    back, _ = read_hdf5(tmp_path / "f32.hdf5")
    assert back["v_a"].dtype == np.float32


def test_values_beyond_float16_are_an_error_not_infinities(tmp_path):
    src = write_hdf5(tmp_path / "f.hdf5", {"big": np.array([[1.0, 1e6]], np.float32)})
    with pytest.raises(TanError, match=r"video 'big' holds values up to 1e\+06, beyond float16's range"):
        convert_features(src, str(tmp_path / "half"), dtype="float16")
    assert listing(tmp_path) == ["f.hdf5"]


def test_a_video_list_selects_videos(tmp_path, arrays):
    src = write_hdf5(tmp_path / "f.hdf5", arrays)
    (tmp_path / "list.txt").write_text("v_b\n\n  v.d.mp4 \nv_b\n")
    videos = convert.read_video_list(str(tmp_path / "list.txt"))
    summary = convert_features(src, str(tmp_path / "some"), videos=videos)
    assert summary.videos == 2 and listing(tmp_path / "some") == ["v.d.mp4.npy", "v_b.npy"]
    with pytest.raises(TanError, match=r"2 of the 3 videos asked for are not in HDF5 file .*: 'x', 'y'"):
        convert_features(src, str(tmp_path / "none"), videos=["x", "v_a", "y"])


# ---------------------------------------------------------------- errors

def test_errors_name_the_path_the_key_and_what_was_expected(tmp_path, arrays):
    out = str(tmp_path / "out")
    with pytest.raises(TanError, match=r"source '.*nowhere.hdf5' not found; expected an HDF5 file or a folder"):
        convert_features(str(tmp_path / "nowhere.hdf5"), out)
    (tmp_path / "notes.txt").write_text("not features")
    with pytest.raises(TanError, match=r"source '.*notes.txt' is neither an HDF5 file nor a folder"):
        convert_features(str(tmp_path / "notes.txt"), out)
    grouped = write_hdf5(tmp_path / "g.hdf5", arrays, key="clip")
    with pytest.raises(TanError, match=r"g.hdf5: group 'v.d.mp4' has no dataset 'c3d_features' \(the feature key: "
                                       r"option --key\); it holds \['clip'\]"):
        convert_features(grouped, out)
    npz = tmp_path / "npz"
    convert_features(grouped, str(npz), key="clip", file_format="npz", out_key="clip")
    with pytest.raises(TanError, match=r"v.d.mp4.npz: no array 'features' \(option --key\); it holds \['clip'\]"):
        convert_features(str(npz), out)
    with pytest.raises(TanError, match=r"dtype \(--dtype\) 'float64' unknown; expected one of float32, float16, keep"):
        convert_features(grouped, out, key="clip", dtype="float64")
    with pytest.raises(TanError, match="--format npz is for folder output"):
        convert_features(grouped, str(tmp_path / "x.h5"), key="clip", file_format="npz")
    with pytest.raises(TanError, match="--layout grouped is for HDF5 output"):
        convert_features(grouped, out, key="clip", layout="grouped")
    with pytest.raises(TanError, match="--out-key .* .npy files have none"):
        convert_features(grouped, out, key="clip", file_format="npy", out_key="x")
    assert not os.path.exists(out)


def test_an_existing_destination_is_untouched_without_overwrite(tmp_path, arrays):
    src = write_hdf5(tmp_path / "f.hdf5", arrays)
    dst = tmp_path / "dst"
    dst.mkdir()
    (dst / "mine.txt").write_text("keep me")
    with pytest.raises(TanError, match=r"destination '.*dst' exists; pass --overwrite"):
        convert_features(src, str(dst))
    assert listing(dst) == ["mine.txt"]
    with pytest.raises(TanError, match="is a folder; an HDF5 file does not replace a folder"):
        convert_features(src, str(dst), to="hdf5", overwrite=True)
    convert_features(src, str(dst), overwrite=True)
    assert listing(dst) == sorted(f"{v}.npy" for v in arrays)
    assert listing(tmp_path) == ["dst", "f.hdf5"]
    with pytest.raises(TanError, match="inside destination"):  # replacing it would delete the source
        convert_features(str(dst), str(tmp_path), to="folder", overwrite=True)


def interrupt_after(monkeypatch, reads):
    """Ctrl-C while reading the video after ``reads`` videos were read."""
    calls = []

    def interrupted(read):
        def wrapper(self, video):
            calls.append(video)
            if len(calls) > reads:
                raise KeyboardInterrupt
            return read(self, video)
        return wrapper

    monkeypatch.setattr(HDF5Features, "read_stored", interrupted(HDF5Features.read_stored))
    monkeypatch.setattr(FolderFeatures, "read_stored", interrupted(FolderFeatures.read_stored))


@pytest.mark.parametrize("target", ["folder", "hdf5"])
def test_an_interrupted_conversion_leaves_the_old_destination_intact(tmp_path, arrays, monkeypatch, target):
    src = write_hdf5(tmp_path / "f.hdf5", arrays)
    dst = tmp_path / ("dst" if target == "folder" else "dst.hdf5")
    with monkeypatch.context() as patched:
        interrupt_after(patched, 2)
        with pytest.raises(KeyboardInterrupt):
            convert_features(src, str(dst))
    assert listing(tmp_path) == ["f.hdf5"]  # no DST, not even a partial one
    old = {"old": np.zeros((2, 6), np.float32)}
    convert_features(write_hdf5(tmp_path / "old.hdf5", old), str(dst))
    before = read_folder(dst)[0] if target == "folder" else read_hdf5(dst)[0]
    interrupt_after(monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt):
        convert_features(src, str(dst), overwrite=True)
    after = read_folder(dst)[0] if target == "folder" else read_hdf5(dst)[0]
    assert_same_bits(after, before)
    assert listing(tmp_path) == sorted(["f.hdf5", "old.hdf5", dst.name])  # no half-written copy beside it
    monkeypatch.undo()
    convert_features(src, str(dst), overwrite=True)  # and then a complete one replaces it
    assert_same_bits(read_folder(dst)[0] if target == "folder" else read_hdf5(dst)[0], arrays)


def test_a_ctrl_c_while_a_folder_is_swapped_in_takes_effect_once_it_is_in_place(tmp_path, arrays, monkeypatch):
    src = write_hdf5(tmp_path / "f.hdf5", arrays)
    dst = tmp_path / "dst"
    convert_features(write_hdf5(tmp_path / "old.hdf5", {"old": np.zeros((2, 6), np.float32)}), str(dst))
    rename = os.rename

    def interrupted_rename(a, b):
        rename(a, b)
        if b.endswith(".old"):  # the old folder moved aside, the new one not yet in place
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(os, "rename", interrupted_rename)
    with pytest.raises(KeyboardInterrupt):
        convert_features(src, str(dst), overwrite=True)
    monkeypatch.undo()
    assert_same_bits(read_folder(dst)[0], arrays)
    assert listing(tmp_path) == ["dst", "f.hdf5", "old.hdf5"]


# ---------------------------------------------------------------- the command line

@pytest.mark.slow
def test_the_command_line_converts_and_prints_a_summary(tmp_path, arrays):
    src = write_hdf5(tmp_path / "g.hdf5", arrays, key="c3d_features")
    proc = run_main("convert_features", src, str(tmp_path / "npz"), "--format", "npz", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "converted 4 videos" in proc.stdout and "grouped layout" in proc.stdout
    assert "dims 6; dtype float32" in proc.stdout and "min 1, median 9.5, max 30" in proc.stdout
    assert "bytes" in proc.stdout and " s\n" in proc.stdout
    proc = run_main("convert_features", str(tmp_path / "npz"), str(tmp_path / "back.h5"), "--layout", "grouped",
                    timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert_same_bits(read_hdf5(tmp_path / "back.h5", "c3d_features")[0], arrays)


@pytest.mark.slow
def test_the_command_line_reports_errors_with_exit_status_2(tmp_path, arrays):
    src = write_hdf5(tmp_path / "f.hdf5", arrays)
    (tmp_path / "dst").mkdir()
    cases = [([str(tmp_path / "missing"), str(tmp_path / "o")], "source '.*missing' not found"),
             ([src, str(tmp_path / "o"), "--dtype", "int8"], "dtype \\(--dtype\\) 'int8' unknown"),
             ([src, str(tmp_path / "dst")], "destination '.*dst' exists; pass --overwrite")]
    for args, message in cases:
        proc = run_main("convert_features", *args, timeout=120)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert any(line.startswith("error: ") for line in proc.stderr.splitlines())
        assert re.search(message, proc.stderr), proc.stderr
    assert listing(tmp_path) == ["dst", "f.hdf5"]


@pytest.mark.slow
def test_the_console_script_explains_its_arguments():
    path = shutil.which("tan-convert-features") or shutil.which("tan-convert-features",
                                                                 path=os.path.dirname(sys.executable))
    if path is None:
        pytest.skip("tan-convert-features is not installed (pip install -e .)")
    help_text = subprocess.run([path, "--help"], stdout=subprocess.PIPE, text=True, timeout=120).stdout
    for option in ("--to", "--layout", "--key", "--out-key", "--format", "--dtype", "--videos", "--overwrite",
                   "Examples"):
        assert option in help_text


# ---------------------------------------------------------------- the same metrics from a converted dataset

@pytest.mark.slow
def test_a_dataset_converted_to_a_folder_and_back_evaluates_to_identical_metrics(synthetic_root, tmp_path):
    """The golden run's trained checkpoint, evaluated by tools/test_net.py on
    synthetic_test from the original HDF5 file, from a folder of .npz converted
    from it, and from an HDF5 file converted back from the folder: the same
    metrics.json figures and the same predictions.jsonl."""
    original = os.path.join(synthetic_root, "synthetic", "features", "synthetic_features.hdf5")
    folder, back = tmp_path / "folder", tmp_path / "back.hdf5"
    convert_features(original, str(folder), file_format="npz")
    convert_features(str(folder), str(back))
    annotations = os.path.join(synthetic_root, "synthetic", "annotations", "test.json")
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(json.dumps({name: {"annotations": annotations, "features": str(path), "format": "seconds"}
                                   for name, path in (("syn_folder", folder), ("syn_back", back))}))

    def evaluation(dataset, *extra):
        """(metrics.json without the checkpoint's path, predictions.jsonl's text)."""
        out = tmp_path / dataset
        proc = golden.run_tool("test_net", "--ckpt", golden.FILES["model_final"],
                               *golden.train_args(synthetic_root, out), *extra, "DATASETS.TEST", f"('{dataset}',)")
        assert proc.returncode == 0, proc.stdout[-3000:]
        results = out / "inference" / "model_final" / dataset
        figures = json.loads((results / "metrics.json").read_text())
        figures.pop("checkpoint")
        return figures, (results / "predictions.jsonl").read_text()

    expected = evaluation("synthetic_test")
    assert expected[0]["num_queries"] > 400
    assert evaluation("syn_folder", "DATASETS.CATALOG", str(catalog)) == expected
    assert evaluation("syn_back", "DATASETS.CATALOG", str(catalog)) == expected
