"""OUTPUT_DIR/config_history.jsonl: which config values held from which epoch.

config.yml is the config the next epoch trains with. Each time it is written
a line is appended here: the first (``"event": "start"``) holds the whole
config a run started with; each later one (``"event": "change"``) the keys
that changed (``[old, new]``) and the point from which the new values hold:
``from_epoch`` and, when the run resumed mid-epoch, ``after_iteration``
(the steps of that epoch already done with the old values).
"""
import datetime
import json
import os

from ..utils.io import atomic_write_text
from .compare import flatten

HISTORY_FILE = "config_history.jsonl"


def _now():
    return datetime.datetime.now().isoformat(sep=" ", timespec="seconds")


def _append(folder, record):
    """Rewrite the (small) file with one more line, atomically: a failed write leaves the old history."""
    path = os.path.join(folder, HISTORY_FILE)
    previous = ""
    if os.path.isfile(path):
        with open(path) as f:
            previous = f.read()
    if previous and not previous.endswith("\n"):
        previous += "\n"
    atomic_write_text(path, previous + json.dumps(record) + "\n")


def record_start(folder, cfg, from_epoch=1):
    _append(folder, {"event": "start", "time": _now(), "from_epoch": from_epoch, "config": flatten(cfg)})


def record_changes(folder, changes, from_epoch, after_iteration=0, reason=""):
    """``changes``: tan.config.compare.Change items."""
    record = {"event": "change", "time": _now(), "from_epoch": from_epoch}
    if after_iteration:
        record["after_iteration"] = after_iteration
    record["changes"] = {c.key: [c.old, c.new] for c in changes}
    if reason:
        record["reason"] = reason
    _append(folder, record)


def read_history(folder):
    """The records, oldest first ([] without a history file)."""
    path = os.path.join(folder, HISTORY_FILE)
    if not os.path.isfile(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]
