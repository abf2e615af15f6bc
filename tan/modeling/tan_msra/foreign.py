"""microsoft/2D-TAN's experiment files (experiments/<dataset>/*.yaml) as tan settings
(tan-convert-config; docs/tan_msra.md §5).

A file is the reference's when its MODEL.NAME is "TAN" and it has a top-level
TAN with FRAME_MODULE, PROP_MODULE, FUSION_MODULE and MAP_MODULE. What its
code reads of the file becomes MODEL.TAN_MSRA, INPUT, DATASETS, SOLVER and
TEST; its data folder (DATA_DIR, relative to the reference's root, the folder
above ``experiments/``) becomes DATASETS.ROOT and a catalog of its layout;
what tan has no place for is listed in the notes. Keys its file leaves out
take its code's defaults (lib/core/config.py).
"""
import os

from ...config.experiment_file import DEFAULTS_TAKEN, ExperimentFile, shown
from ...config.models import ForeignConfig
from ...errors import TanError

MODULES = ("FRAME_MODULE", "PROP_MODULE", "FUSION_MODULE", "MAP_MODULE")

# The reference's defaults for what a file may leave out (its lib/core/config.py).
DEFAULTS = {
    "DATASET": {"NUM_SAMPLE_CLIPS": 256, "TARGET_STRIDE": 16, "NORMALIZE": False, "NO_VAL": False,
                "VIS_INPUT_TYPE": ""},
    "TRAIN": {"LR": 0.001, "WEIGHT_DECAY": 0, "MAX_EPOCH": 20, "BATCH_SIZE": 4, "CONTINUE": False},
    "TEST": {"NMS_THRESH": 0.4, "BATCH_SIZE": 1},
    "LOSS": {"NAME": "bce_loss"},
}

# Per DATASET.NAME: its reader's files under DATA_DIR ({split}; {vis}: VIS_INPUT_TYPE), the format
# tan reads them with, and its splits (val only without NO_VAL).
LAYOUTS = {
    "TACoS": {"annotations": "{split}.json", "features": "tall_c3d_features.hdf5", "format": "tacos"},
    "ActivityNet": {"annotations": "{split}.json", "features": "sub_activitynet_v1-3.c3d.hdf5",
                    "feature_key": "c3d_features", "format": "seconds"},
    "Charades": {"annotations": "charades_sta_{split}.txt", "durations": "Charades_v1_{split}.csv",
                 "features": "{vis}_features.hdf5", "format": "charades_txt"},
}

# Keys of its files that change nothing tan computes, or that tan does differently.
NOT_CARRIED = {
    ("TEST", "RECALL"): "TEST.RECALL and TEST.TIOU: tan reports R@1 and R@5 at IoU 0.1, 0.3, 0.5 and 0.7, and mIoU",
    ("TEST", "EVAL_TRAIN"): "TEST.EVAL_TRAIN: tan evaluates on DATASETS.VAL (else TEST) only",
    ("TEST", "INTERVAL"): "TEST.INTERVAL: tan evaluates every SOLVER.TEST_PERIOD epochs (1 here)",
    ("TEST", "TOP_K"): "TEST.TOP_K: unused by its evaluation, which keeps max(RECALL) moments",
    ("TRAIN", "SHUFFLE"): "TRAIN.SHUFFLE: tan always shuffles the training queries",
    ("CUDNN", "DETERMINISTIC"): "CUDNN.DETERMINISTIC and CUDNN.ENABLED: not settable in tan",
    ("DATASET", "RANDOM_SAMPLING"): "DATASET.RANDOM_SAMPLING: read by none of its datasets",
}


def is_reference_file(data):
    tan, model = data.get("TAN"), data.get("MODEL")
    return (isinstance(tan, dict) and all(isinstance(tan.get(m), dict) for m in MODULES)
            and isinstance(model, dict) and model.get("NAME") == "TAN")


def section(data, name):
    """A top-level section of the file over the reference's defaults."""
    try:
        return ExperimentFile.of(data).section(name, DEFAULTS.get(name))
    except TypeError as e:
        raise TanError(str(e)) from None


def reference_root(path):
    """The folder its relative paths start from: the one above ``experiments/``, else the current one."""
    parts = os.path.abspath(path).split(os.sep)
    if "experiments" in parts[:-1]:
        last = len(parts) - 2 - parts[:-1][::-1].index("experiments")
        return os.sep.join(parts[:last]) or os.sep
    return os.getcwd()


class Reader:
    """Reads the file's values, each failure naming the key."""

    def __init__(self, path):
        self.path = path

    def fail(self, key, message):
        raise TanError(f"{self.path}: {key}: {message}")

    def params(self, tan, module, names):
        node = tan[module]
        if node.get("NAME") not in names:
            self.fail(f"TAN.{module}.NAME", f"is {shown(node.get('NAME'))}; tan converts {' and '.join(names)}")
        params = node.get("PARAMS")
        if not isinstance(params, dict):
            self.fail(f"TAN.{module}.PARAMS", f"is {shown(params)}; expected a mapping of its settings")
        return node["NAME"], params

    def value(self, params, key, where):
        if key not in params:
            self.fail(f"{where}.{key}", "is missing")
        return params[key]

    def same(self, value, expected, where, what):
        if value != expected:
            self.fail(where, f"is {shown(value)}, but {what} is {expected!r}; its model needs them equal")


def convert(data, path):
    """The ForeignConfig of a reference experiment file (``data`` parsed from ``path``)."""
    read, notes, root, data = Reader(path), [], reference_root(path), ExperimentFile.of(data)
    dataset, train, test = section(data, "DATASET"), section(data, "TRAIN"), section(data, "TEST")
    settings, word_size = model_settings(read, data["TAN"], dataset, train, section(data, "LOSS"), notes)
    datasets, catalog = dataset_entries(read, dataset)
    data_dir = data.get("DATA_DIR") or ""
    config = {
        "MODEL": {"ARCHITECTURE": "TAN_MSRA", "TAN_MSRA": settings},
        "INPUT": {"NUM_PRE_CLIPS": dataset["NUM_SAMPLE_CLIPS"], "PRE_QUERY_SIZE": word_size,
                  # where torchtext keeps the GloVe file its datasets load (glove.6B.300d)
                  "WORD_VECTORS": os.path.join(root, ".vector_cache", "glove.6B.300d.txt")},
        "DATASETS": {"ROOT": os.path.normpath(os.path.join(root, data_dir)), **datasets},
        "DATALOADER": {"NUM_WORKERS": int(data.get("WORKERS", 16))},
        "SOLVER": {"LR": float(train["LR"]), "BATCH_SIZE": int(train["BATCH_SIZE"]),
                   "MAX_EPOCH": int(train["MAX_EPOCH"]), "MILESTONES": [], "TEST_PERIOD": 1, "CHECKPOINT_PERIOD": 1},
        "TEST": {"NMS_THRESH": float(test["NMS_THRESH"]), "BATCH_SIZE": int(test["BATCH_SIZE"])},
    }
    cudnn = data.get("CUDNN") or {}
    if "BENCHMARK" in cudnn:
        config["CUDNN_BENCHMARK"] = bool(cudnn["BENCHMARK"])
    config["OUTPUT_DIR"] = os.path.join("outputs", "tan_msra_" + os.path.splitext(os.path.basename(path))[0])
    config["SEED"] = 0  # its train.py seeds torch with 0
    checkpoint = (data.get("MODEL") or {}).get("CHECKPOINT") or ""
    if checkpoint:
        checkpoint = os.path.normpath(os.path.join(root, checkpoint))
        if train["CONTINUE"]:
            config["MODEL"]["WEIGHT"] = checkpoint
            notes.append("TRAIN.CONTINUE: training starts from MODEL.CHECKPOINT (MODEL.WEIGHT)")
        else:
            notes.append(f"MODEL.CHECKPOINT: evaluate it with tan-test --config-file THIS_FILE --ckpt {checkpoint}")
    notes.append(f"DATASETS.ROOT: its DATA_DIR {data_dir!r} from {root} (tan-convert-config --data-root DIR "
                 f"for another folder)")
    notes.append("INPUT.WORD_VECTORS: the glove.6B.300d.txt that torchtext downloads for its datasets; "
                 "point it elsewhere if yours is not there")
    notes.append("its ReduceLROnPlateau (TRAIN.FACTOR, TRAIN.PATIENCE, stepped on the validation loss) has no "
                 "equivalent: the learning rate stays SOLVER.LR (SOLVER.MILESTONES empty)")
    if any(key in data for key in ("MODEL_DIR", "RESULT_DIR", "LOG_DIR")):
        notes.append("MODEL_DIR, RESULT_DIR and LOG_DIR: tan writes checkpoints, results and logs under OUTPUT_DIR")
    notes += [note for (group, key), note in NOT_CARRIED.items() if key in (data.get(group) or {})]
    taken = [k for node in (dataset, train, test) for k in node.defaults_taken()]
    if taken:
        notes.append(f"{DEFAULTS_TAKEN}: {', '.join(taken)}")
    return ForeignConfig(config, catalog, tuple(notes))


def model_settings(read, tan, dataset, train, loss, notes):
    """(MODEL.TAN_MSRA, the word-vector size) of the file's TAN, DATASET, TRAIN and LOSS."""
    _, frame = read.params(tan, "FRAME_MODULE", ("FrameAvgPool",))
    hidden = read.value(frame, "HIDDEN_SIZE", "TAN.FRAME_MODULE.PARAMS")
    prop_name, prop = read.params(tan, "PROP_MODULE", ("SparsePropMaxPool", "SparsePropConv", "PropMaxPool"))
    if prop_name == "PropMaxPool":  # its dense map: every diagonal up to NUM_LAYERS - 1, at stride 1
        layers = [read.value(prop, "NUM_LAYERS", "TAN.PROP_MODULE.PARAMS")]
        prop_name = "SparsePropMaxPool"
        notes.append(f"TAN.PROP_MODULE PropMaxPool is its SparsePropMaxPool with NUM_SCALE_LAYERS {layers}")
    else:
        layers = read.value(prop, "NUM_SCALE_LAYERS", "TAN.PROP_MODULE.PARAMS")
    if prop_name == "SparsePropConv":
        read.same(prop.get("HIDDEN_SIZE"), hidden, "TAN.PROP_MODULE.PARAMS.HIDDEN_SIZE",
                  "TAN.FRAME_MODULE.PARAMS.HIDDEN_SIZE")
    _, fusion = read.params(tan, "FUSION_MODULE", ("BaseFusion",))
    read.same(fusion.get("HIDDEN_SIZE"), hidden, "TAN.FUSION_MODULE.PARAMS.HIDDEN_SIZE",
              "TAN.FRAME_MODULE.PARAMS.HIDDEN_SIZE")
    lstm = read.value(fusion, "LSTM", "TAN.FUSION_MODULE.PARAMS")
    _, maps = read.params(tan, "MAP_MODULE", ("MapConv",))
    read.same(maps.get("INPUT_SIZE"), hidden, "TAN.MAP_MODULE.PARAMS.INPUT_SIZE", "TAN.FRAME_MODULE.PARAMS.HIDDEN_SIZE")
    hidden_sizes = list(read.value(maps, "HIDDEN_SIZES", "TAN.MAP_MODULE.PARAMS"))
    if not hidden_sizes:
        read.fail("TAN.MAP_MODULE.PARAMS.HIDDEN_SIZES", "is empty; its map convolutions need one size per layer")
    predicted = tan.get("PRED_INPUT_SIZE")
    if predicted is None and hidden_sizes[-1] != 512:  # its code's default
        read.fail("TAN.PRED_INPUT_SIZE", f"is missing (its code's default: 512), but the last of "
                                         f"TAN.MAP_MODULE.PARAMS.HIDDEN_SIZES is {hidden_sizes[-1]}; its model needs "
                                         f"them equal")
    read.same(512 if predicted is None else predicted, hidden_sizes[-1], "TAN.PRED_INPUT_SIZE",
              "the last of TAN.MAP_MODULE.PARAMS.HIDDEN_SIZES")
    if loss.get("NAME") != "bce_rescale_loss":
        read.fail("LOSS.NAME", f"{loss.described('NAME')}; its code has bce_rescale_loss only")
    if dataset.get("TARGET_STRIDE", 0) <= 0 or dataset["NUM_SAMPLE_CLIPS"] <= 0:
        read.fail("DATASET.NUM_SAMPLE_CLIPS", "its fixed-length input needs NUM_SAMPLE_CLIPS and TARGET_STRIDE > 0")
    settings = {
        "NUM_CLIPS": dataset["NUM_SAMPLE_CLIPS"] // dataset["TARGET_STRIDE"],
        "NORMALIZE": bool(dataset["NORMALIZE"]),
        "TOKENS": "whitespace",
        "FRAME_MODULE": {k: read.value(frame, k, "TAN.FRAME_MODULE.PARAMS")
                         for k in ("INPUT_SIZE", "HIDDEN_SIZE", "KERNEL_SIZE", "STRIDE")},
        "PROP_MODULE": {"NAME": prop_name, "NUM_SCALE_LAYERS": list(layers)},
        "FUSION_MODULE": {"TXT_HIDDEN_SIZE": read.value(fusion, "TXT_HIDDEN_SIZE", "TAN.FUSION_MODULE.PARAMS"),
                          "LSTM": {"NUM_LAYERS": lstm.get("NUM_LAYERS", 1),
                                   "BIDIRECTIONAL": bool(lstm.get("BIDIRECTIONAL", False))}},
        "MAP_MODULE": {"HIDDEN_SIZES": hidden_sizes,
                       **{k: list(read.value(maps, k, "TAN.MAP_MODULE.PARAMS"))
                          for k in ("KERNEL_SIZES", "STRIDES", "PADDINGS", "DILATIONS")}},
        "LOSS": {k: float(read.value(loss.get("PARAMS") or {}, k, "LOSS.PARAMS"))
                 for k in ("MIN_IOU", "MAX_IOU", "BIAS")},
        "CLIP_GRAD_NORM": 10.0,  # its train.py clips every step at 10
        "WEIGHT_DECAY": float(train["WEIGHT_DECAY"]),
    }
    return settings, read.value(fusion, "TXT_INPUT_SIZE", "TAN.FUSION_MODULE.PARAMS")


def dataset_entries(read, dataset):
    """DATASETS.TRAIN/VAL/TEST and the catalog entries of its reader's files."""
    name = dataset.get("NAME")
    if name not in LAYOUTS:
        read.fail("DATASET.NAME", f"is {shown(name)}; expected one of {', '.join(LAYOUTS)} (its datasets)")
    vis = dataset.get("VIS_INPUT_TYPE")
    if not vis:
        needs = "names its feature file by it" if name == "Charades" else "reads c3d features only (c3d)"
        read.fail("DATASET.VIS_INPUT_TYPE", f"{dataset.described('VIS_INPUT_TYPE')}; its {name} reader {needs}")
    if name != "Charades" and vis != "c3d":
        read.fail("DATASET.VIS_INPUT_TYPE", f"is {vis!r}; its {name} reader reads c3d features only")
    splits = {"TRAIN": "train", "VAL": None if dataset["NO_VAL"] else "val", "TEST": "test"}
    catalog, datasets = {}, {}
    for key, split in splits.items():
        if split is None:
            datasets[key] = []
            continue
        entry_name = f"tan_msra_{name.lower()}_{split}"
        catalog[entry_name] = {field: value.format(split=split, vis=vis) for field, value in LAYOUTS[name].items()}
        datasets[key] = [entry_name]
    return datasets, catalog
