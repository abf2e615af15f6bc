"""MS-2D-TAN's experiment files (its experiments/*/*.yaml) as tan settings, for
tan-convert-config (docs/ms2dtan.md §8)."""
import os

from ...config.experiment_file import ExperimentFile, shown
from ...config.models import ForeignConfig
from ...errors import TanError
from .config import anchor_counts
from .data_layout import BENCHMARKS, WORD_VECTORS, dataset_name

PROPS = {"MultiScalePropConvTanhBN": "conv", "MultiScalePropMaxPool": "pool"}
MAPS = {"MapGatedConv": "gated", "Conv": "conv"}


def _section(data, *keys):
    """The mapping at ``keys`` of the file (empty where it leaves it out), knowing its path."""
    node = ExperimentFile.of(data)
    for key in keys:
        node = node.section(key)
    return node


def _refuse(path, key, value, expected):
    raise TanError(f"{path}: {key} is {shown(value)}; tan's MS_TAN supports {expected}")


def _model_settings(path, model):
    """MODEL.MS_TAN's module keys from its MODEL section."""
    clip, prop = _section(model, "CLIP_MODULE", "PARAMS"), _section(model, "PROP_MODULE", "PARAMS")
    fusion, maps = _section(model, "FUSION_MODULE", "PARAMS"), _section(model, "MAP_MODULE", "PARAMS")
    for key, name, known in (("PROP_MODULE", model["PROP_MODULE"].get("NAME"), PROPS),
                             ("MAP_MODULE", model["MAP_MODULE"].get("NAME"), MAPS)):
        if name not in known:
            _refuse(path, f"MODEL.{key}.NAME", name, ", ".join(known))
    if model.get("CLIP_MODULE", {}).get("NAME") != "ClipAvgPool":
        _refuse(path, "MODEL.CLIP_MODULE.NAME", model.get("CLIP_MODULE", {}).get("NAME"), "ClipAvgPool")
    if clip.get("GROUPS", 1) != 1:
        _refuse(path, "MODEL.CLIP_MODULE.PARAMS.GROUPS", clip.get("GROUPS"), "1 only (no groups)")
    if model.get("PRED_MODULE", {}).get("NAME", "ProposalHead") != "ProposalHead":
        _refuse(path, "MODEL.PRED_MODULE.NAME", model["PRED_MODULE"]["NAME"], "ProposalHead")
    if model.get("FUSION_MODULE", {}).get("NAME") != "MulNormFusion":
        _refuse(path, "MODEL.FUSION_MODULE.NAME", model.get("FUSION_MODULE", {}).get("NAME"), "MulNormFusion")
    hidden = clip["HIDDEN_SIZE"]
    sizes = {"PROP_MODULE.HIDDEN_SIZE": prop.get("HIDDEN_SIZE", hidden), "FUSION_MODULE.HIDDEN_SIZE": fusion["HIDDEN_SIZE"],
             "FUSION_MODULE.VIS_INPUT_SIZE": fusion["VIS_INPUT_SIZE"], "MAP_MODULE.INPUT_SIZE": maps["INPUT_SIZE"]}
    for key, size in sizes.items():
        if size != hidden:
            _refuse(path, f"MODEL.{key}", size, f"one hidden size throughout (CLIP_MODULE.HIDDEN_SIZE {hidden})")
    for key in ("STRIDES", "DILATIONS"):  # missing: its code's default, 1 everywhere
        if any(v != 1 for v in maps.get(key) or []):
            _refuse(path, f"MODEL.MAP_MODULE.PARAMS.{key}", maps.get(key), "1 only")
    encoder = fusion.get("TXT_ENCODER", {})
    if encoder.get("NAME", "LSTM") != "LSTM":
        _refuse(path, "MODEL.FUSION_MODULE.PARAMS.TXT_ENCODER.NAME", encoder.get("NAME"), "LSTM")
    return {
        "CLIP_MODULE": {"INPUT_SIZE": clip["INPUT_SIZE"], "HIDDEN_SIZE": hidden,
                        "KERNEL_SIZE": clip.get("KERNEL_SIZE", 1), "STRIDE": clip.get("STRIDE", 1)},
        "PROP_MODULE": {"NAME": PROPS[model["PROP_MODULE"]["NAME"]], "NUM_LAYERS": list(prop["NUM_LAYERS"])},
        "FUSION_MODULE": {"TXT_HIDDEN_SIZE": fusion["TXT_HIDDEN_SIZE"], "TXT_NUM_LAYERS": encoder.get("NUM_LAYERS", 1),
                          "TXT_BIDIRECTIONAL": bool(encoder.get("BIDIRECTIONAL", False))},
        "MAP_MODULE": {"NAME": MAPS[model["MAP_MODULE"]["NAME"]], "HIDDEN_SIZES": list(maps["HIDDEN_SIZES"]),
                       "KERNEL_SIZES": list(maps["KERNEL_SIZES"]), "PADDINGS": list(maps["PADDINGS"])},
    }, fusion.get("TXT_INPUT_SIZE", 300)


def _time_unit(path, dataset):
    """DATASET.TIME_UNIT, the seconds per feature row, which its sliding windows need (0 where unused)."""
    unit = dataset.get("TIME_UNIT")
    if unit is None and dataset.get("SLIDING_WINDOW", False):
        raise TanError(f"{path}: DATASET.TIME_UNIT is missing; its sliding windows need the seconds per feature "
                       f"row of its features (its Charades-STA I3D files give 0.64)")
    return float(unit or 0.0)


def _check_scales(path, dataset, ms):
    """Its OUTPUT_NUM_CLIPS and NUM_ANCHORS follow from the model's layers: check they agree."""
    layers = ms["PROP_MODULE"]["NUM_LAYERS"]
    clips = ms["NUM_CLIPS"] // ms["CLIP_MODULE"]["STRIDE"]
    derived = ([clips // 2 ** s for s in range(len(layers))], anchor_counts(layers))
    for key, value in zip(("OUTPUT_NUM_CLIPS", "NUM_ANCHORS"), derived):
        if dataset.get(key) is None:
            raise TanError(f"{path}: DATASET.{key} is missing; its code reads it, and the model's layers give "
                           f"{value} (INPUT_NUM_CLIPS / CLIP STRIDE and PROP NUM_LAYERS)")
    given = (dataset["OUTPUT_NUM_CLIPS"], dataset["NUM_ANCHORS"])
    given = tuple([v] if isinstance(v, int) else list(v) for v in given)
    if given != tuple(derived):
        default = ("" if "INPUT_NUM_CLIPS" in dataset else
                   f"; DATASET.INPUT_NUM_CLIPS is missing, so its code's default {ms['NUM_CLIPS']} was taken")
        raise TanError(f"{path}: DATASET.OUTPUT_NUM_CLIPS {given[0]} and NUM_ANCHORS {given[1]} do not follow from "
                       f"the model (INPUT_NUM_CLIPS / CLIP STRIDE and PROP NUM_LAYERS give {derived[0]} and "
                       f"{derived[1]}){default}")


def _datasets(path, dataset, name):
    """(DATASETS settings, its benchmark folder, DATA_DIR) of its DATASET section: the built-in
    names of its data layout (tan/modeling/ms2dtan/data_layout.py)."""
    folder, splits, _, _, _, kinds = BENCHMARKS[name]
    vis = dataset.get("VIS_INPUT_TYPE")
    kind = {stem: k for k, stem in kinds.items()}.get(vis)
    if kind is None:
        raise TanError(f"{path}: DATASET.VIS_INPUT_TYPE is {shown(vis)}; expected one of its {name} feature files "
                       f"({', '.join(kinds.values())})")
    names = {split: f"{dataset_name(name, kind)}_{split}" for split in splits}
    with_val = "val" in names and not dataset.get("NO_VAL", False)
    data_dir = str(dataset.get("DATA_DIR", f"data/{folder}")).rstrip("/")
    return ({"ROOT": os.path.dirname(data_dir) or ".", "TRAIN": [names["train"]],
             "VAL": [names["val"]] if with_val else [], "TEST": [names["test"]]}, folder, data_dir)


def _notes(data, folder, data_dir):
    notes = [f"DATASETS.ROOT is its data folder, the one above DATASET.DATA_DIR {data_dir!r} unless --data-root "
             f"is given; GloVe 6B 300d is read from {folder}/{WORD_VECTORS} there, where its loader caches it"]
    optim = _section(data, "OPTIM")
    if optim.get("NAME", "Adam") != "Adam":
        notes.append(f"OPTIM.NAME {optim.get('NAME')!r} is trained with Adam here (tan's models train with Adam)")
    if data["MODEL"].get("CHECKPOINT"):
        notes.append(f"its checkpoint evaluates with: tan-test --config-file THIS_FILE --ckpt {data['MODEL']['CHECKPOINT']}")
    if _section(data, "TRAIN").get("CONTINUE"):
        notes.append("TRAIN.CONTINUE is not carried over: tan resumes a run from its OUTPUT_DIR by itself")
    notes.append("R@1 and R@5 are reported at IoU 0.1, 0.3, 0.5 and 0.7 (the reference prints its TEST.TIOU only)")
    return tuple(notes)


def from_experiment_file(data, path):
    """ForeignConfig of an MS-2D-TAN experiment file, or None when ``data`` is not one."""
    data = ExperimentFile.of(data)
    model = data.get("MODEL")
    if not isinstance(model, dict) or model.get("NAME") != "MultiScale_TAN":
        return None
    dataset, loss = _section(data, "DATASET"), _section(data, "LOSS", "PARAMS")
    if _section(data, "LOSS").get("NAME", "bce_loss") != "bce_rescale_loss":
        _refuse(path, "LOSS.NAME", _section(data, "LOSS").get("NAME"), "bce_rescale_loss (its code's default, when the "
                "key is missing, is bce_loss)")
    if dataset.get("TXT_INPUT_TYPE", "glove") != "glove":
        _refuse(path, "DATASET.TXT_INPUT_TYPE", dataset.get("TXT_INPUT_TYPE"), "glove")
    name = str(dataset.get("NAME", "")).lower()
    if name not in BENCHMARKS:
        _refuse(path, "DATASET.NAME", dataset.get("NAME"), ", ".join(BENCHMARKS))
    settings, query_size = _model_settings(path, model)
    ms = {"NUM_CLIPS": int(dataset.get("INPUT_NUM_CLIPS", 256)), "SLIDING_WINDOW": bool(dataset.get("SLIDING_WINDOW", False)),
          "TIME_UNIT": _time_unit(path, dataset), "NORMALIZE": bool(dataset.get("NORMALIZE", True)),
          # its Charades-STA reader splits at white space; the others tokenise with NLTK, as tan's tokens nearly do
          "TOKENS": "whitespace" if name == "charades" else "tan",
          **settings,
          "LOSS": {"MIN_IOU": loss.get("MIN_IOU", 0.5), "MAX_IOU": loss.get("MAX_IOU", 1.0), "BIAS": loss.get("BIAS", 0.0)}}
    _check_scales(path, dataset, ms)
    datasets, folder, data_dir = _datasets(path, dataset, name)
    optim, train, test = _section(data, "OPTIM"), _section(data, "TRAIN"), _section(data, "TEST")
    config = {
        "MODEL": {"ARCHITECTURE": "MS_TAN", "MS_TAN": ms},
        "INPUT": {"PRE_QUERY_SIZE": query_size, "WORD_VECTORS": f"{folder}/{WORD_VECTORS}"},
        "DATASETS": datasets,
        # a key the file leaves out takes its code's default
        "SOLVER": {"LR": float(_section(optim, "PARAMS")["LR"]), "BATCH_SIZE": int(train.get("BATCH_SIZE", 4)),
                   "MAX_EPOCH": int(train.get("MAX_EPOCH", 20)), "MILESTONES": []},
        "TEST": {"BATCH_SIZE": int(test.get("BATCH_SIZE", 1)), "NMS_THRESH": float(test.get("NMS_THRESH", 0.4))},
    }
    return ForeignConfig(config, None, _notes(data, folder, data_dir))
