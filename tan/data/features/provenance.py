"""How a folder of features was made: the extractor record ``extractor.json``
that ``tan-extract-features`` writes beside the files (docs/video.md §3).

A record names the backbone, its weights (the model name it was loaded from
and a digest of the weights themselves), and for video features the
sampling: frame rate, clip length, frames per clip and resolution; a
plug-in's backbone adds the plug-in that registers it. Two records describe
the same extractor when everything but the model's name or path (the same
weights may sit in another folder), the plug-in's (its file may move too) and
the decoder's version agrees. A folder without a record is of unknown
making, and nothing is compared for it.
"""
import json
import os

from ...errors import TanError
from ...utils.io import atomic_write_text

EXTRACTOR_FILE = "extractor.json"
RECORD_VERSION = 1
_NOT_COMPARED = {"model", "plugin", "decoder", "tan_version"}


def record_path(folder):
    return os.path.join(folder, EXTRACTOR_FILE)


def read_extractor(path):
    """The extractor record of a feature folder (or None: no record, or ``path`` is a file)."""
    if not os.path.isdir(path):
        return None
    file = record_path(path)
    if not os.path.isfile(file):
        return None
    try:
        with open(file, encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError) as e:
        raise TanError(f"extractor record {file!r} cannot be read ({e}); it is written by tan-extract-features: "
                       f"remove it only if the folder's features were made otherwise") from None
    if not isinstance(record, dict) or "backbone" not in record:
        raise TanError(f"extractor record {file!r}: expected a JSON object with a 'backbone' field")
    return record


def write_extractor(folder, record):
    atomic_write_text(record_path(folder), json.dumps(record, indent=2, sort_keys=True) + "\n")


def same_extractor(a, b):
    """Whether records ``a`` and ``b`` describe the same extractor (see the module docstring)."""
    def compared(record):
        return {k: v for k, v in record.items() if k not in _NOT_COMPARED}
    return compared(a) == compared(b)


def differences(a, b):
    """"field a -> b" for each compared field in which the records differ."""
    keys = sorted((set(a) | set(b)) - _NOT_COMPARED)
    return [f"{k} {a.get(k)!r} -> {b.get(k)!r}" for k in keys if a.get(k) != b.get(k)]


def describe_extractor(record):
    """One line: "clip (openai/clip-vit-base-patch32, sha256:1a2b3c4d), 0.5 frames/s, 2 s clips, 224 px"."""
    text = f"{record.get('backbone')} ({record.get('model')}, {str(record.get('weights', ''))[:15]})"
    if "frame_rate" in record:
        text += (f", {record['frame_rate']:g} frames/s, {record['clip_seconds']:g} s clips, "
                 f"{record.get('resolution')} px")
    return text
