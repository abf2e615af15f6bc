"""An annotation format added by a plug-in (docs/data.md §11): tests/plugins/toy_format.py
registers "toy_tsv", a config loads it through PLUGINS, and the stock tools train and test a
2D-TAN on the built-in synthetic dataset rewritten in that format."""
import json
import os

import pytest
import yaml

from tan.config import load_config
from tan.config.plugins import import_plugin
from tan.data import DatasetCatalog
from tan.data.formats import format_names, load_annotations, register_format
from tan.errors import TanError
import tan.modeling  # noqa: F401  (the built-in models register their data layouts' formats, as in a run)

from conftest import REPO, SYNTHETIC_CONFIG, run_tool

PLUGIN = os.path.join(REPO, "tests", "plugins", "toy_format.py")
# tan's formats, and those of its built-in plug-in (the readings of MS-2D-TAN's data layout)
BUILTIN_FORMATS = ("charades_txt", "charades_txt_trimmed", "ego4d_nlq", "jsonl", "mad", "seconds", "tacos",
                   "tacos_video_stems")
VIDEOS = {"train": 60, "val": 10, "test": 20}  # the first videos of each split: a small run
FAST = ["MODEL.DEVICE", "cpu", "DATALOADER.NUM_WORKERS", "0"]


def toy_lines(synthetic_root, split, videos):
    """The first ``videos`` videos of a synthetic split as toy_tsv lines."""
    with open(os.path.join(synthetic_root, "synthetic", "annotations", f"{split}.json")) as f:
        annotations = json.load(f)
    return [f"{video}\t{info['duration']}\t{start}\t{end}\t{sentence}"
            for video, info in sorted(annotations.items())[:videos]
            for (start, end), sentence in zip(info["timestamps"], info["sentences"])]


@pytest.fixture(scope="module")
def toy_root(synthetic_root, tmp_path_factory):
    """DATASETS.ROOT with toy_{train,val,test}.tsv and a catalog naming them (format toy_tsv, the synthetic
    features); returns (root, {split: number of lines})."""
    root = tmp_path_factory.mktemp("toy")
    features = os.path.join(synthetic_root, "synthetic", "features", "synthetic_features.hdf5")
    catalog, lines = {}, {}
    for split, videos in VIDEOS.items():
        rows = toy_lines(synthetic_root, split, videos)
        (root / f"{split}.tsv").write_text("\n".join(rows) + "\n")
        lines[split] = len(rows)
        catalog[f"toy_{split}"] = {"annotations": f"{split}.tsv", "format": "toy_tsv", "features": features}
    (root / "catalog.yaml").write_text(yaml.safe_dump(catalog))
    return str(root), lines


def toy_options(synthetic_root, toy, *plugins):
    return [*(["PLUGINS", repr(list(plugins))] if plugins else []), "DATASETS.ROOT", toy,
            "DATASETS.CATALOG", "catalog.yaml", "DATASETS.TRAIN", "('toy_train',)", "DATASETS.VAL", "('toy_val',)",
            "DATASETS.TEST", "('toy_test',)",
            "INPUT.WORD_VECTORS", os.path.join(synthetic_root, "synthetic", "word_vectors.txt"), *FAST]


def test_the_plugin_s_reader_keeps_clips_and_counts_like_the_built_in_ones(tmp_path):
    import_plugin(PLUGIN)
    assert "toy_tsv" in format_names() and set(BUILTIN_FORMATS) <= set(format_names())
    path = tmp_path / "a.tsv"
    path.write_text("v1\t30\t1.5\t7\tA man opens a door.\n"
                    "\n"
                    "v1\t30\t25\t31.5\t  he closes it  \n"   # clipped to the video
                    "v2\t10\t12\t14\tpast the end\n"          # clipped to nothing
                    "v2\t10\t1\t2\n"                          # four fields
                    "v2\tten\t1\t2\tduration in words\n"
                    "v2\t0\t1\t2\tno length\n"
                    "v2\t10\tnan\t2\tnot a number\n"
                    "v2\t10\t1\t1e999\tinfinite\n"
                    "v2\t10\t1\t2\t   \n")
    queries, counts = load_annotations(str(path), "toy_tsv")
    assert [(q.video, q.duration, q.start, q.end, q.sentence) for q in queries] == [
        ("v1", 30.0, 1.5, 7.0, "A man opens a door."), ("v1", 30.0, 25.0, 30.0, "he closes it")]
    assert queries[1].moments == ((25.0, 30.0),)
    assert counts == {"moment clipped to the video": 2, "start >= end": 1, "malformed line": 1,
                      "duration not a number": 1, "video with a non-positive duration": 1,
                      "timestamp not two numbers": 1, "timestamp not finite": 1, "empty sentence": 1}


def test_a_format_given_twice_is_refused():
    import_plugin(PLUGIN)
    with pytest.raises(KeyError, match="'toy_tsv' is already registered in annotation format"):
        register_format("toy_tsv")(lambda path, durations, counts: [])


def test_an_unregistered_format_is_named_with_the_registered_ones(tmp_path):
    with pytest.raises(TanError) as error:
        DatasetCatalog(str(tmp_path)).register("mine", {"annotations": "a.csv", "features": "f", "format": "csv"})
    assert str(error.value).startswith(f"dataset 'mine': format 'csv' unknown; expected one of "
                                       f"{', '.join(format_names())}")
    assert all(name in str(error.value) for name in BUILTIN_FORMATS) and "PLUGINS" in str(error.value)
    with pytest.raises(TanError, match=r"annotation format 'csv' unknown for '.*a\.csv'; expected one of "
                                       + ", ".join(BUILTIN_FORMATS[:4])):
        load_annotations(str(tmp_path / "a.csv"), "csv")


def test_a_catalog_of_the_plugin_s_format_is_read_once_the_config_names_the_plugin(synthetic_root, toy_root):
    toy, lines = toy_root
    cfg = load_config(SYNTHETIC_CONFIG, toy_options(synthetic_root, toy, PLUGIN))
    assert list(cfg.PLUGINS) == [PLUGIN]
    entry = DatasetCatalog.from_config(cfg).get("toy_test")
    assert entry["format"] == "toy_tsv"
    queries, counts = load_annotations(entry["annotations"], entry["format"])
    assert len(queries) == lines["test"] and not counts


@pytest.mark.slow
def test_without_the_plugin_the_catalog_s_format_is_unknown(synthetic_root, toy_root, tmp_path):
    """In a fresh process, as a user would meet it: the message lists the registered formats, and
    toy_tsv is not among them."""
    toy, _ = toy_root
    proc = run_tool("check_data", "--config-file", SYNTHETIC_CONFIG, *toy_options(synthetic_root, toy),
                    "OUTPUT_DIR", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    message = (f"': format 'toy_tsv' unknown; expected one of {', '.join(BUILTIN_FORMATS)} "
               f"(a plug-in's format needs its module in PLUGINS)")
    assert "dataset 'toy_" in proc.stderr and message in proc.stderr, proc.stderr


def read_metrics(folder):
    with open(os.path.join(folder, "toy_test", "metrics.json")) as f:
        return json.load(f)


@pytest.mark.slow
def test_the_stock_tools_train_and_test_on_the_plugin_s_format(synthetic_root, toy_root, tmp_path):
    toy, lines = toy_root
    out = tmp_path / "run"
    proc = run_tool("train_net", "--config-file", SYNTHETIC_CONFIG, *toy_options(synthetic_root, toy, PLUGIN),
                    "OUTPUT_DIR", str(out), "SOLVER.MAX_EPOCH", "2", "SOLVER.TEST_PERIOD", "2",
                    "SOLVER.MILESTONES", "(2,)", "SOLVER.CHECKPOINT_PERIOD", "2", "SOLVER.LOG_PERIOD", "2",
                    "TEST.BATCH_SIZE", "32")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    trained = read_metrics(out / "inference" / "model_final")
    assert trained["num_queries"] == lines["test"]
    # The checkpoint's stored config names the plug-in: test_net needs neither a config file nor PLUGINS.
    proc = run_tool("test_net", "--ckpt", str(out / "model_final.pth"), "OUTPUT_DIR", str(tmp_path / "tested"),
                    *FAST)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    tested = read_metrics(tmp_path / "tested" / "inference" / "model_final")
    assert {k: v for k, v in tested.items() if k != "checkpoint"} == \
        {k: v for k, v in trained.items() if k != "checkpoint"}


def test_a_reader_that_returns_a_broken_record_is_named(tmp_path):
    """The Query guarantees (docs/data.md §11.2) are checked: a window past the video's end from a plug-in
    reader stops the run with the reader and the record named, instead of reaching the loss."""
    from tan.data.formats import Query

    @register_format("broken_windows_for_a_test")
    def read(path, durations, counts):
        return [Query("v", 10.0, 1.0, 2.0, "a person sits."), Query("v", 10.0, 4.0, 12.0, "a person stands.")]

    (tmp_path / "a.txt").write_text("anything")
    with pytest.raises(TanError, match=r"reader .*read returned a record that breaks the Query guarantees .*"
                                       r"record 2 of .*a.txt.*window \(4.0, 12.0\)"):
        load_annotations(str(tmp_path / "a.txt"), "broken_windows_for_a_test")
