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
import shutil

from ..errors import TanError
from ..utils.io import atomic_write_text, read_json_lines, read_named_text
from .compare import flatten
from .setup import save_config

CONFIG_FILE = "config.yml"
HISTORY_FILE = "config_history.jsonl"


def _now():
    return datetime.datetime.now().isoformat(sep=" ", timespec="seconds")


def _append(folder, record):
    """Rewrite the (small) file with one more line, atomically: a failed write leaves the old history."""
    path = os.path.join(folder, HISTORY_FILE)
    previous = read_named_text(path, f"config history {path!r}") if os.path.isfile(path) else ""
    if previous and not previous.endswith("\n"):
        previous += "\n"
    atomic_write_text(path, previous + json.dumps(record) + "\n")


def start_record(cfg, from_epoch=1):
    """The history's first line: the whole config a run started with."""
    return {"event": "start", "time": _now(), "from_epoch": from_epoch, "config": flatten(cfg)}


def change_record(changes, from_epoch, after_iteration=0, reason=""):
    """A later line: ``changes`` (tan.config.compare.Change items) hold from this point."""
    record = {"event": "change", "time": _now(), "from_epoch": from_epoch}
    if after_iteration:
        record["after_iteration"] = after_iteration
    record["changes"] = {c.key: [c.old, c.new] for c in changes}
    if reason:
        record["reason"] = reason
    return record


def commit_config(cfg, record):
    """OUTPUT_DIR/config.yml becomes ``cfg`` and the history gains ``record``; a
    write that fails is a TanError naming the file (each write is atomic).
    Returns the path of config.yml."""
    path = os.path.join(cfg.OUTPUT_DIR, CONFIG_FILE)
    try:
        save_config(cfg, path)
        _append(cfg.OUTPUT_DIR, record)
    except OSError as e:
        raise TanError(f"cannot write {e.filename or path}: {e.strerror or e}") from None
    return path


# What a run writes besides its config while it trains, before any checkpoint: its records of losses
# and metrics. A withdrawn run takes them with it, so the next run's records are its own alone.
RUN_RECORDS = ("metrics.jsonl", "tensorboard")


def withdraw_config(folder):
    """Remove config.yml, the history and the loss and metric records (metrics.jsonl, tensorboard/) of
    a run that started ``folder`` and stopped before it saved anything to resume from: the folder holds
    no run, and the next command starts it afresh, with another config if it likes. log.txt stays: it
    says what happened."""
    for name in RUN_RECORDS:  # best effort: this runs while another error is on its way to the user
        path = os.path.join(folder, name)
        try:
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            elif os.path.lexists(path):
                os.unlink(path)
        except OSError:
            pass
    names = [CONFIG_FILE]
    try:
        records = read_history(folder)
    except TanError:  # unreadable: not this run's alone, kept
        records = []
    if len(records) == 1 and records[0].get("event") == "start":  # the history is this run's line alone
        names.append(HISTORY_FILE)
    for name in names:
        try:
            os.unlink(os.path.join(folder, name))
        except FileNotFoundError:
            pass


def read_history(folder):
    """The records, oldest first ([] without a history file)."""
    path = os.path.join(folder, HISTORY_FILE)
    if not os.path.isfile(path):
        return []
    return read_json_lines(path, f"config history {path!r}")
