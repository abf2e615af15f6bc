"""Dataset names -> files under DATASETS.ROOT.

Built-in names follow the reference layout; more can be registered from
Python (``DatasetCatalog.register``) or from a YAML/JSON file named by
``DATASETS.CATALOG`` that maps names to entries with the same fields, e.g.::

    mydata_train:
      annotations: mydata/train.json
      features: mydata/features.hdf5
      format: seconds          # or tacos (frames + fps), or charades_txt
      feature_key: c3d_features  # only for the group-per-video layout
      durations: Charades_v1_train.csv  # only for charades_txt
"""
import copy
import os

import yaml

from ..errors import TanError
from .annotations import FORMATS

_FIELDS = {"annotations", "features", "format", "feature_key", "durations", "generator"}
_PATHS = ("annotations", "features", "durations")


def _builtin():
    entries = {}
    for split in ("train", "val", "test"):
        entries[f"tacos_{split}"] = {
            "annotations": f"tacos/annotations/{split}.json",
            "features": "tacos/features/tall_c3d_features.hdf5",
            "format": "tacos",
        }
        entries[f"activitynet_{split}"] = {
            "annotations": f"activitynet1.3/annotations/{split}.json",
            "features": "activitynet1.3/features/activitynet_v1-3_c3d.hdf5",
            "format": "seconds",
            "feature_key": "c3d_features",
        }
        entries[f"synthetic_{split}"] = {
            "annotations": f"synthetic/annotations/{split}.json",
            "features": "synthetic/features/synthetic_features.hdf5",
            "format": "seconds",
            "generator": "synthetic",
        }
    for split in ("train", "test"):
        entries[f"charades_{split}"] = {
            "annotations": f"charades_sta/annotations/charades_{split}.json",
            "features": "charades_sta/features/vgg_rgb_features.hdf5",
            "format": "seconds",
        }
        # The original release: text annotations, durations from the Charades CSV.
        entries[f"charades_txt_{split}"] = {
            "annotations": f"charades_sta/annotations/charades_sta_{split}.txt",
            "durations": f"charades_sta/annotations/Charades_v1_{split}.csv",
            "features": "charades_sta/features/vgg_rgb_features.hdf5",
            "format": "charades_txt",
        }
    return entries


class DatasetCatalog:
    _entries = _builtin()

    @classmethod
    def register(cls, name, entry):
        unknown = set(entry) - _FIELDS
        missing = {"annotations", "features"} - set(entry)
        if entry.get("format", "seconds") not in FORMATS:
            raise TanError(f"dataset {name!r}: format {entry['format']!r} unknown; expected one of {', '.join(FORMATS)}")
        if unknown or missing:
            raise TanError(f"dataset {name!r}: unknown fields {sorted(unknown)} / missing fields {sorted(missing)}; "
                           f"fields are {sorted(_FIELDS)}")
        cls._entries[name] = {"format": "seconds", **entry}

    @classmethod
    def register_file(cls, path):
        if not os.path.isfile(path):
            raise TanError(f"dataset catalog file {path!r} (DATASETS.CATALOG) not found")
        try:
            with open(path) as f:
                data = yaml.safe_load(f)  # JSON is YAML too
        except yaml.YAMLError as e:
            raise TanError(f"dataset catalog file {path!r} is not valid YAML/JSON: {e}") from None
        if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
            raise TanError(f"dataset catalog file {path!r}: expected a mapping of dataset names to entries")
        for name, entry in data.items():
            cls.register(name, entry)

    @classmethod
    def names(cls):
        return sorted(cls._entries)

    @classmethod
    def get(cls, name, root):
        """The entry of ``name`` with paths made absolute against ``root``."""
        if name not in cls._entries:
            raise TanError(f"unknown dataset {name!r}; known: {', '.join(cls.names())} "
                           f"(register more with DATASETS.CATALOG)")
        entry = copy.deepcopy(cls._entries[name])
        for key in _PATHS:
            if entry.get(key):
                entry[key] = os.path.join(root, entry[key])
        entry["name"] = name
        return entry


def resolve_path(root, path):
    """A config path: absolute as given, else relative to DATASETS.ROOT."""
    return path if os.path.isabs(path) else os.path.join(root, path)
