"""Dataset names -> files under DATASETS.ROOT.

Built-in names follow the reference layout; more come from a YAML/JSON file
named by ``DATASETS.CATALOG`` or from Python (``register`` on a
``DatasetCatalog`` instance). A catalog is an instance, not a process-wide
registry, so two runs in one process never see each other's names. The file
maps names to entries with the same fields, e.g.::

    mydata_train:
      annotations: mydata/train.json
      features: mydata/features.hdf5   # an HDF5 file, a folder of per-video .npy/.npz,
                                       # or a list of them (streams, concatenated)
      format: seconds          # or tacos (frames + fps), charades_txt, jsonl, a plug-in's
      feature_key: c3d_features  # the array's name: in an HDF5 group per video, or in .npz
                                 # files (default features); one, or a list of one per stream
      durations: Charades_v1_train.csv  # only for charades_txt
      text_features: mydata/clip_text   # per-query sentence features (INPUT.SENTENCE_FEATURES): a folder
                                        # of per-query files, or one HDF5 file keyed by query id
      text_feature_key: last_hidden_state

Field meanings: docs/data.md §3 (features) and §9 (the JSON-lines layout); formats: §1, §11.
"""
import copy
import os

from ..errors import TanError
from ..utils.yaml_files import read_yaml_file
from .formats import ANNOTATION_FORMATS, FORMATS_WITH_QUERY_IDS, format_names

_FIELDS = {"annotations", "features", "format", "feature_key", "durations", "generator", "text_features",
           "text_feature_key"}
_PATHS = ("annotations", "features", "durations", "text_features")


# Built-in datasets in the reference layout under DATASETS.ROOT: name ->
# (splits, entry), where "{split}" in a field stands for the split.
BUILTIN_DATASETS = {
    "tacos": (("train", "val", "test"), {
        "annotations": "tacos/annotations/{split}.json",
        "features": "tacos/features/tall_c3d_features.hdf5", "format": "tacos"}),
    "activitynet": (("train", "val", "test"), {
        "annotations": "activitynet1.3/annotations/{split}.json",
        "features": "activitynet1.3/features/activitynet_v1-3_c3d.hdf5", "format": "seconds",
        "feature_key": "c3d_features"}),
    "synthetic": (("train", "val", "test"), {
        "annotations": "synthetic/annotations/{split}.json",
        "features": "synthetic/features/synthetic_features.hdf5", "format": "seconds", "generator": "synthetic"}),
    # Long videos made of the synthetic dataset's moments (docs/long_videos.md): 2-5 minute training videos,
    # 5-minute validation and test videos, an hour-long test split; one 10-second moment asked per video.
    "synthetic_long": (("train", "val", "test", "test_hour"), {
        "annotations": "synthetic_long/annotations/{split}.json", "features": "synthetic_long/features/{split}.hdf5",
        "format": "seconds", "generator": "synthetic_long"}),
    # Ego4D's Natural Language Queries (docs/long_videos.md): queries in 8-minute clips, each clip's SlowFast
    # rows cut from its video's (tools/ego4d_nlq_clips.py) into one file, a dataset per clip_uid.
    "ego4d_nlq": (("train", "val", "test_unannotated"), {
        "annotations": "ego4d/annotations/nlq_{split}.json", "features": "ego4d/features/nlq_clips.hdf5",
        "format": "ego4d_nlq"}),
    # MAD (docs/long_videos.md): audio-description sentences in movies of one to three hours, every movie's
    # CLIP frame features at 5 rows a second in one file, a dataset per movie; CLIP's token features of every
    # query in one file, a dataset per query id (read with INPUT.SENTENCE_FEATURES True).
    "mad": (("train", "val", "test"), {
        "annotations": "mad/annotations/MAD_{split}.json", "features": "mad/features/CLIP_frames_features_5fps.h5",
        "text_features": "mad/features/CLIP_language_tokens_features.h5", "format": "mad"}),
    "charades": (("train", "test"), {
        "annotations": "charades_sta/annotations/charades_{split}.json",
        "features": "charades_sta/features/vgg_rgb_features.hdf5", "format": "seconds"}),
    # The original release: text annotations, durations from the Charades CSV.
    "charades_txt": (("train", "test"), {
        "annotations": "charades_sta/annotations/charades_sta_{split}.txt",
        "durations": "charades_sta/annotations/Charades_v1_{split}.csv",
        "features": "charades_sta/features/vgg_rgb_features.hdf5", "format": "charades_txt"}),
}

# The three benchmarks as lighthouse publishes them (docs/data.md §9): JSON-lines
# annotations, CLIP and SlowFast features (512 + 2304 channels, one .npz per
# video) concatenated, and CLIP token features of each query (512).
LIGHTHOUSE_STREAMS = ("clip", "slowfast")
for _name, _splits in (("charades", ("train", "test")), ("tacos", ("train", "val", "test")),
                       ("activitynet", ("train", "val"))):
    BUILTIN_DATASETS[f"{_name}_lighthouse"] = (_splits, {
        "annotations": f"lighthouse/data/{_name}/{_name}_{{split}}_release.jsonl", "format": "jsonl",
        "features": [f"lighthouse/features/{_name}/{s}" for s in LIGHTHOUSE_STREAMS],
        "text_features": f"lighthouse/features/{_name}/clip_text"})
del _name, _splits
# QVHighlights (Moment-DETR's benchmark) as lighthouse publishes it: the same streams; several windows per
# query, 2-second clips' saliency scores; its test split has no labels (the evaluation server holds them).
BUILTIN_DATASETS["qvhighlight_lighthouse"] = (("train", "val", "test"), {
    "annotations": "lighthouse/data/qvhighlight/highlight_{split}_release.jsonl", "format": "jsonl",
    "features": [f"lighthouse/features/qvhighlight/{s}" for s in LIGHTHOUSE_STREAMS],
    "text_features": "lighthouse/features/qvhighlight/clip_text"})


def register_builtin(name, splits, entry):
    """Add built-in datasets ``{name}_{split}`` for each of ``splits`` (a plug-in's: a reference
    code's data layout under DATASETS.ROOT); "{split}" in a field stands for the split."""
    if name in BUILTIN_DATASETS and BUILTIN_DATASETS[name] != (tuple(splits), entry):
        raise TanError(f"built-in dataset {name!r} is registered already, with other files")
    BUILTIN_DATASETS[name] = (tuple(splits), entry)


def builtin_entries():
    """The built-in names, as a new dict on each call (callers may change it)."""
    return {f"{name}_{split}": {key: _format_split(value, split) for key, value in entry.items()}
            for name, (splits, entry) in BUILTIN_DATASETS.items() for split in splits}


def _format_split(value, split):
    return [v.format(split=split) for v in value] if isinstance(value, list) else value.format(split=split)


class DatasetCatalog:
    """Dataset names -> entries: the built-in ones, those of ``catalog_file``
    (read once, here) and any added with :meth:`register`."""

    def __init__(self, root, catalog_file=""):
        self.root = root
        self._entries = builtin_entries()
        if catalog_file:
            for name, entry in _read_catalog_file(catalog_file).items():
                self.register(name, entry)

    @classmethod
    def from_config(cls, cfg):
        """DATASETS.ROOT with the DATASETS.CATALOG file, if one is set."""
        root = cfg.DATASETS.ROOT
        return cls(root, resolve_path(root, cfg.DATASETS.CATALOG) if cfg.DATASETS.CATALOG else "")

    def register(self, name, entry):
        unknown = set(entry) - _FIELDS
        missing = {"annotations", "features"} - set(entry)
        # The formats registered now: the built-in ones and those of the plug-ins imported so far.
        fmt = entry.get("format", "seconds")
        if not isinstance(fmt, str) or fmt not in ANNOTATION_FORMATS:
            raise TanError(f"dataset {name!r}: format {fmt!r} unknown; expected one of "
                           f"{', '.join(format_names())} (a plug-in's format needs its module in PLUGINS)")
        if unknown or missing:
            raise TanError(f"dataset {name!r}: unknown fields {sorted(unknown)} / missing fields {sorted(missing)}; "
                           f"fields are {sorted(_FIELDS)}")
        for key in _FIELDS - {"generator"}:
            if key in entry:
                _check_field(name, key, entry[key])
        if entry.get("text_features") and entry.get("format", "seconds") not in FORMATS_WITH_QUERY_IDS:
            raise TanError(f"dataset {name!r}: text_features are found by query id, which the "
                           f"{entry.get('format', 'seconds')!r} format does not give its queries (formats with "
                           f"query ids: {', '.join(sorted(FORMATS_WITH_QUERY_IDS))})")
        # A copy, so later changes to the caller's dict do not reach the catalog.
        self._entries[name] = copy.deepcopy({"format": "seconds", **entry})

    def names(self):
        return sorted(self._entries)

    def get(self, name):
        """The entry of ``name`` with paths made absolute against the root, and its "name"."""
        if name not in self._entries:
            raise TanError(f"unknown dataset {name!r}; known: {', '.join(self.names())} "
                           f"(register more with DATASETS.CATALOG)")
        entry = copy.deepcopy(self._entries[name])
        for key in _PATHS:
            if isinstance(entry.get(key), list):
                entry[key] = [os.path.join(self.root, p) for p in entry[key]]
            elif entry.get(key):
                entry[key] = os.path.join(self.root, entry[key])
        entry["name"] = name
        return entry


# Fields that may list several values: one per feature stream.
_LIST_FIELDS = ("features", "feature_key")


def _check_field(name, key, value):
    """A field is a non-empty string; a list of them only where streams are meant."""
    if isinstance(value, str) and value:
        return
    if key in _LIST_FIELDS and isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
        return
    expected = "a non-empty string, or a non-empty list of them (one per stream)" if key in _LIST_FIELDS else \
        "a non-empty string"
    raise TanError(f"dataset {name!r}: field {key!r} must be {expected}, got {value!r}")


def _read_catalog_file(path):
    """{name: entry} of a YAML/JSON catalog file, not yet validated entry by entry."""
    data = read_yaml_file(path, f"dataset catalog file {path!r} (DATASETS.CATALOG)")  # JSON is YAML too
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise TanError(f"dataset catalog file {path!r}: expected a mapping of dataset names to entries")
    return data


def field_paths(value):
    """A catalog field's paths as a list: none, one, or the list of feature streams."""
    return [] if not value else [value] if isinstance(value, str) else list(value)


def resolve_path(root, path):
    """A config path: absolute as given, else relative to DATASETS.ROOT."""
    return path if os.path.isabs(path) else os.path.join(root, path)
