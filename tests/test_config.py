import os

import pytest
import yaml

from tan.config import get_cfg_defaults, load_config, save_config
from tan.engine.run_folder import open_run_folder
from tan.engine.setup import resolve_device
from tan.errors import TanError

from conftest import REPO, SYNTHETIC_CONFIG

# A config in the reference re-implementation's own style (tuple strings, all its keys).
REFERENCE_STYLE_YAML = """
MODEL:
  ARCHITECTURE: "TAN"
  TAN:
    NUM_CLIPS: 128
    FEATPOOL:
      INPUT_SIZE: 4096
      HIDDEN_SIZE: 512
      KERNEL_SIZE: 2
    FEAT2D:
      POOLING_COUNTS: [15,8,8,8]
    INTEGRATOR:
      QUERY_HIDDEN_SIZE: 512
      LSTM:
        NUM_LAYERS: 3
        BIDIRECTIONAL: False
    PREDICTOR:
      HIDDEN_SIZE: 512
      KERNEL_SIZE: 5
      NUM_STACK_LAYERS: 8
    LOSS:
      MIN_IOU: 0.3
      MAX_IOU: 0.7
DATASETS:
  TRAIN: ("tacos_train", "tacos_val",)
  TEST: ("tacos_test",)
INPUT:
  NUM_PRE_CLIPS: 256
  PRE_QUERY_SIZE: 300
DATALOADER:
  NUM_WORKERS: 4
SOLVER:
  LR: 0.0001
  BATCH_SIZE: 32
  MILESTONES: (7, 9)
  MAX_EPOCH: 10
  TEST_PERIOD: 1
  CHECKPOINT_PERIOD: 1
TEST:
  BATCH_SIZE: 32
  NMS_THRESH: 0.4
"""


def write(tmp_path, text, name="cfg.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_every_default_key_has_a_comment():
    source = open(os.path.join(REPO, "tan", "config", "defaults.py")).read().splitlines()
    for index, line in enumerate(source):
        if line.startswith("_C.") and "CN()" not in line:
            assert source[index - 1].strip().startswith("#"), f"undocumented key: {line}"


def test_reference_style_yaml_loads_unchanged(tmp_path):
    cfg = load_config(write(tmp_path, REFERENCE_STYLE_YAML))
    assert cfg.DATASETS.TRAIN == ("tacos_train", "tacos_val")
    assert cfg.SOLVER.MILESTONES == (7, 9)
    assert cfg.MODEL.TAN.FEAT2D.POOLING_COUNTS == [15, 8, 8, 8]


SHIPPED = sorted(os.path.relpath(os.path.join(folder, f), os.path.join(REPO, "configs"))
                 for folder, _, files in os.walk(os.path.join(REPO, "configs")) for f in files if f.endswith(".yaml"))


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_configs_load(name):
    load_config(os.path.join(REPO, "configs", name))


def test_order_is_defaults_then_file_then_command_line(tmp_path):
    path = write(tmp_path, "SOLVER:\n  LR: 0.5\n  MAX_EPOCH: 3\n")
    cfg = load_config(path, ["SOLVER.MAX_EPOCH", "7"])
    assert cfg.SOLVER.LR == 0.5 and cfg.SOLVER.MAX_EPOCH == 7
    assert cfg.TEST.NMS_THRESH == get_cfg_defaults().TEST.NMS_THRESH


def test_unknown_key_in_file_names_it_and_suggests(tmp_path):
    path = write(tmp_path, "SOLVER:\n  MAX_EPOCHS: 3\n")
    with pytest.raises(TanError, match=r"SOLVER.MAX_EPOCHS.*did you mean SOLVER.MAX_EPOCH"):
        load_config(path)


def test_unknown_key_on_command_line_suggests_closest():
    with pytest.raises(TanError, match=r"'MODEL.TAN.NUM_CLIP'.*MODEL.TAN.NUM_CLIPS"):
        load_config(None, ["MODEL.TAN.NUM_CLIP", "16"])


def test_wrong_type_names_the_key():
    with pytest.raises(TanError, match="SOLVER.MAX_EPOCH"):
        load_config(None, ["SOLVER.MAX_EPOCH", "'ten'"])


def test_odd_override_list_is_refused():
    with pytest.raises(TanError, match="odd number.*'SOLVER.LR'"):
        load_config(None, ["SOLVER.MAX_EPOCH", "3", "SOLVER.LR"])


def test_num_pre_clips_must_be_a_multiple_of_num_clips():
    with pytest.raises(TanError, match="INPUT.NUM_PRE_CLIPS.*multiple of MODEL.TAN.NUM_CLIPS"):
        load_config(None, ["INPUT.NUM_PRE_CLIPS", "200"])


def test_pooling_counts_must_fit_the_map():
    with pytest.raises(TanError, match="POOLING_COUNTS"):
        load_config(None, ["MODEL.TAN.FEAT2D.POOLING_COUNTS", "[15, 8, 8, 9]"])


def test_malformed_yaml_names_the_file(tmp_path):
    path = write(tmp_path, "SOLVER:\n  LR: [0.1\n")
    with pytest.raises(TanError, match="not valid YAML"):
        load_config(path)


@pytest.mark.parametrize("text,line,first,key", [
    ("SOLVER:\n  LR: 0.1\nTEST:\n  NMS_THRESH: 0.4\nSOLVER:\n  MAX_EPOCH: 3\n", 5, 1, "SOLVER"),
    ("SOLVER:\n  LR: 0.001\n  LR: 0.9\n", 3, 2, "LR"),
    ("MODEL:\n  TAN:\n    FEAT2D:\n      NAME: pool\n      NAME: conv\n", 5, 4, "NAME"),
])
def test_a_key_given_twice_is_refused_with_both_lines(tmp_path, text, line, first, key):
    path = write(tmp_path, text)
    with pytest.raises(TanError) as error:
        load_config(path)
    assert str(error.value).startswith(f"config file {path!r}, line {line}: key {key!r} is given a second time "
                                       f"(first at line {first})")


def test_a_dataset_catalog_naming_a_dataset_twice_is_refused(tmp_path):
    from tan.data import DatasetCatalog

    catalog = tmp_path / "catalog.yaml"
    catalog.write_text("mine:\n  annotations: a.json\n  features: f.hdf5\nmine:\n  annotations: b.json\n"
                       "  features: g.hdf5\n")
    with pytest.raises(TanError, match=r"catalog file .*catalog.yaml.* \(DATASETS.CATALOG\), line 4: key 'mine' "
                                       r"is given a second time \(first at line 1\)"):
        DatasetCatalog(str(tmp_path), str(catalog)).get("mine")


def test_malformed_yaml_is_one_line_saying_where():
    from tan.utils.yaml_files import parse_yaml

    with pytest.raises(TanError) as error:
        parse_yaml("SOLVER: x\n  LR: 1\n", "config file 'c.yaml'")
    assert str(error.value) == "config file 'c.yaml' is not valid YAML: line 2, column 5: mapping values are not " \
                               "allowed here"


def test_yaml_merge_keys_may_override_what_they_merge_in():
    from tan.utils.yaml_files import parse_yaml

    data = parse_yaml("base: &b {LR: 0.1, MAX_EPOCH: 3}\nrun:\n  <<: *b\n  LR: 0.2\n", "test")
    assert data["run"] == {"LR": 0.2, "MAX_EPOCH": 3}


def test_a_config_stored_in_a_checkpoint_is_read_the_same_way():
    from tan.config.setup import load_config_text

    with pytest.raises(TanError, match="the stored config, line 3: key 'LR' is given a second time"):
        load_config_text("SOLVER:\n  LR: 0.1\n  LR: 0.2\n", "the stored config")


def test_config_files_are_utf8_with_or_without_a_byte_order_mark(tmp_path):
    path = tmp_path / "bom.yaml"
    path.write_bytes("\ufeff# café\nSOLVER:\n  LR: 0.02\n".encode("utf-8"))
    assert load_config(str(path)).SOLVER.LR == 0.02
    path.write_bytes(b"SOLVER:\n  LR: 0.02\n# caf\xe9\n")
    with pytest.raises(TanError, match=r"is not UTF-8 text \(byte 0xe9 on line 3\); save it as UTF-8"):
        load_config(str(path))


@pytest.mark.parametrize("where", ["yaml", "command line"])
def test_whole_numbers_for_float_keys_are_read_as_floats_and_range_checked(tmp_path, where):
    def config(lr):
        if where == "yaml":
            return load_config(write(tmp_path, f"SOLVER:\n  LR: {lr}\n"))
        return load_config(None, ["SOLVER.LR", str(lr)])
    lr = config(1).SOLVER.LR
    assert lr == 1.0 and isinstance(lr, float)
    with pytest.raises(TanError, match=r"^config key SOLVER.LR: expected a positive learning rate, got -1.0$"):
        config(-1)
    with pytest.raises(TanError, match="SOLVER.MAX_EPOCH"):  # integers stay integers: 2.5 epochs is refused
        load_config(None, ["SOLVER.MAX_EPOCH", "2.5"])


def test_unknown_device_value_is_refused():
    with pytest.raises(TanError, match="MODEL.DEVICE"):
        load_config(None, ["MODEL.DEVICE", "tpu"])


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_cuda_is_a_clear_error():
    with pytest.raises(TanError, match="CUDA is not available"):
        resolve_device("cuda")
    assert resolve_device("auto").type == "cpu"


def test_saved_config_loads_back_to_the_same_config(tmp_path):
    cfg = load_config(SYNTHETIC_CONFIG, ["SOLVER.LR", "0.02", "DATASETS.TRAIN", "('a_train', 'b_train')"])
    path = str(tmp_path / "config.yml")
    save_config(cfg, path)
    again = load_config(path)
    assert again == cfg
    assert yaml.safe_load(open(path))["SOLVER"]["LR"] == 0.02


def test_nms_units_must_be_one_of_its_choices():
    assert load_config(None, ["TEST.NMS_UNITS", "clips"]).TEST.NMS_UNITS == "clips"
    with pytest.raises(TanError, match=r"TEST.NMS_UNITS: expected 'seconds' or 'clips', got 'frames'"):
        load_config(None, ["TEST.NMS_UNITS", "frames"])


def test_a_folder_config_from_before_nms_units_resumes_without_a_refusal(tmp_path):
    # config.yml as written before TEST.NMS_UNITS existed: the key is absent and reads as the default
    cfg = load_config(SYNTHETIC_CONFIG, ["OUTPUT_DIR", str(tmp_path)])
    save_config(cfg, str(tmp_path / "config.yml"))
    saved = yaml.safe_load((tmp_path / "config.yml").read_text())
    del saved["TEST"]["NMS_UNITS"]
    (tmp_path / "config.yml").write_text(yaml.safe_dump(saved))
    assert load_config(str(tmp_path / "config.yml")).TEST.NMS_UNITS == "seconds"
    folder = open_run_folder(cfg)
    try:
        assert folder.changes == [] and not folder.fresh
    finally:
        folder.abandon()
    # naming the other rule is a change of what is measured: guarded, as TEST.NMS_THRESH is
    other = load_config(SYNTHETIC_CONFIG, ["OUTPUT_DIR", str(tmp_path), "TEST.NMS_UNITS", "clips"])
    with pytest.raises(TanError, match=r"TEST.NMS_UNITS: 'seconds' -> 'clips'"):
        open_run_folder(other)
