"""OUTPUT_DIR of a training run, the one module that knows it.

Before anything is written: the folder is created, locked for this run alone,
cleared of what a killed run left, and its config.yml compared with this
run's config (docs/checkpoints.md §6 gives the rules; docs/training.md the
flag). As the run goes: config.yml and config_history.jsonl, what a run
that stopped before its first checkpoint takes back, and what a run refused
at its start takes back (its log, and the folder it made).

config.yml is the config the next epoch trains with; config_history.jsonl
says which values held from which epoch. Each time config.yml is written a
line is appended to the history: the first (``"event": "start"``) holds the whole
config a run started with; each later one (``"event": "change"``) the keys
that changed (``[old, new]``) and the point from which the new values hold:
``from_epoch`` and, when the run resumed mid-epoch, ``after_iteration``
(the steps of that epoch already done with the old values).
"""
import datetime
import json
import os
import shutil
from dataclasses import dataclass, field

from ..config import load_config
from ..config.compare import config_changes, flatten
from ..config.setup import save_config
from ..errors import TanError
from ..utils.io import atomic_write_text, clear_abandoned_temporaries, read_json_lines, read_named_text
from ..utils.logger import close_log_file
from ..utils.run_lock import RunLock, describe_holder

ACCEPT_FLAG = "--accept-config-changes"
CONFIG_FILE = "config.yml"
HISTORY_FILE = "config_history.jsonl"
LOG_FILE = "log.txt"


@dataclass
class RunFolder:
    """What rank 0 found in OUTPUT_DIR: the lock it holds, the config changes
    (tan.config.compare.Change) against the folder's config.yml, and what it
    cleaned up. ``fresh``: there was no config.yml, this run starts the folder."""
    path: str
    lock: RunLock
    fresh: bool
    changes: list = field(default_factory=list)
    removed_temporaries: list = field(default_factory=list)
    created: bool = False  # OUTPUT_DIR did not exist before this run
    log_started: bool = False  # there was no log.txt: the one in the folder is this run's
    started: bool = False  # the run began to train: :meth:`record` wrote the folder's config

    def release(self):
        """The run is over, however it ended: unlock. A run that never began to train (refused at its
        start) takes back what it wrote: the log.txt it started, whatever else the folder holds (a run
        it refused to resume), and OUTPUT_DIR where this run made it, so that a refusal leaves no folder
        behind that looks like a run's. The console keeps the message that says why."""
        self.lock.release()
        take_back_log(self.path, self.log_started and not self.started, self.created, alone=False)

    def abandon(self):
        """This run stops before it started (:meth:`release`)."""
        self.release()

    def record(self, cfg, state, logger):
        """config.yml becomes the config the next step trains with (``state``: the run's
        TrainingState); the history says from where: its first line for a fresh folder, a change
        line for accepted changes. Nothing is written for a resumed run with the same config."""
        self.started = True
        if self.fresh:
            logger.info("saved the merged config to %s", commit_config(cfg, start_record(cfg, state.epoch)))
            return
        if not self.changes:
            return
        reason = "runtime settings" if all(not c.affects_results for c in self.changes) else "accepted"
        commit_config(cfg, change_record(self.changes, state.epoch, state.iter_in_epoch, reason))
        logger.info("config.yml updated; the change is recorded in %s from epoch %d", HISTORY_FILE, state.epoch)

    def withdraw(self, trained=True):
        """A run that started this folder stopped before it saved anything to resume from: the
        folder holds no run again (:func:`withdraw_config`). A folder that held a run keeps it.
        ``trained``: whether it took a step; one that took none never began to train, and its log
        is taken back as a refused one's (:meth:`release`)."""
        if not trained:
            self.started = False
        if self.fresh:
            withdraw_config(self.path)

    def describe(self, logger):
        """The log lines about the folder, once logging is set up."""
        if self.lock.taken_over:
            logger.warning("took over the lock of %s: that run is gone (killed or crashed)",
                           describe_holder(self.lock.taken_over))
        if self.removed_temporaries:
            logger.info("removed %d half-written file(s) of that run: %s", len(self.removed_temporaries),
                        ", ".join(self.removed_temporaries))
        for change in self.changes:
            if change.affects_results:
                logger.warning("config change accepted (%s): %s", ACCEPT_FLAG, change)
            else:
                logger.info("config change that does not alter results: %s", change)


def _remove_if_empty(path, created):
    if created and os.path.isdir(path) and not os.listdir(path):
        os.rmdir(path)


def take_back_log(folder, log_started, created, alone=True):
    """The log.txt a run started in ``folder`` (``log_started``) removed (it stops being written to),
    and the folder with it where the run made it and nothing else is left (``created``): what a run
    refused at its start leaves. ``alone``: only where the log is all the folder holds (a tool that
    cannot tell a refusal from a run that wrote its results beside the log). Best effort: an error is
    on its way to the user."""
    path = os.path.join(folder, LOG_FILE)
    try:
        if log_started and os.path.isfile(path) and (not alone or os.listdir(folder) == [LOG_FILE]):
            close_log_file(path)
            os.unlink(path)
        _remove_if_empty(folder, created)
    except OSError:
        pass


def create_output_dir(path):
    """Make OUTPUT_DIR (with its parents); True when it did not exist."""
    created = not os.path.isdir(path)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise TanError(f"OUTPUT_DIR {path!r} cannot be created: {e.strerror or e}") from None
    if not os.access(path, os.W_OK):
        raise TanError(f"OUTPUT_DIR {path!r} is not writable")
    return created


def _saved_config(path, plugins):
    """The folder's config.yml, read with this run's plug-ins (those it names may have moved)."""
    try:
        return load_config(path, freeze=False, plugins=plugins)
    except TanError as e:
        raise TanError(f"the run folder's own config cannot be read, so this run cannot be checked against it: {e}. "
                       f"Repair or remove {path}, or use another OUTPUT_DIR") from None


def folder_changes(cfg):
    """The differences (tan.config.compare.Change) of ``cfg`` from its OUTPUT_DIR's config.yml, read with
    this run's plug-ins; none where the folder has no config.yml yet."""
    saved = os.path.join(cfg.OUTPUT_DIR, CONFIG_FILE)
    return config_changes(_saved_config(saved, cfg.PLUGINS), cfg) if os.path.isfile(saved) else []


def refusal(folder, guarded):
    lines = "\n".join(f"  {change}" for change in guarded)
    return TanError(
        f"OUTPUT_DIR {folder!r} holds a run with another config; these keys differ from its {CONFIG_FILE} "
        f"(old -> new):\n{lines}\nNothing was written. Train in another OUTPUT_DIR, or pass {ACCEPT_FLAG} to "
        f"continue this run with the new values from its next step (recorded in {HISTORY_FILE}).")


def open_run_folder(cfg, accept_changes=False):
    """Create and lock OUTPUT_DIR, clean what a dead run left, compare configs.

    Raises TanError (lock released, nothing written) when another run holds
    the folder or when a key that alters results changed without ``accept_changes``."""
    path = cfg.OUTPUT_DIR
    created = create_output_dir(path)
    try:
        lock = RunLock(path).acquire()
    except BaseException:
        _remove_if_empty(path, created)
        raise
    try:
        changes = folder_changes(cfg)
        guarded = [c for c in changes if c.affects_results]
        if guarded and not accept_changes:
            raise refusal(path, guarded)
        # holding the lock, no other run of this folder writes here: temporaries naming no writer go too
        removed = [entry for entry, _ in clear_abandoned_temporaries(path, unknown_writers=True)]
    except BaseException:
        lock.release()
        _remove_if_empty(path, created)
        raise
    return RunFolder(path, lock, not os.path.isfile(os.path.join(path, CONFIG_FILE)), changes, removed, created)


# config.yml and config_history.jsonl as the run goes
def _now():
    return datetime.datetime.now().isoformat(sep=" ", timespec="seconds")


def _append(folder, record):
    """Rewrite the (small) file with one more line, atomically: a failed write leaves the old history.
    A record that is the last line again (all but its time) is not added twice: the run that wrote it
    was stopped before config.yml followed, and the same command writes both again."""
    path = os.path.join(folder, HISTORY_FILE)
    previous = read_named_text(path, f"config history {path!r}") if os.path.isfile(path) else ""
    if previous and not previous.endswith("\n"):
        previous += "\n"
    lines = previous.splitlines()
    if lines and _untimed(_parsed(lines[-1])) == _untimed(json.loads(json.dumps(record))):
        return
    atomic_write_text(path, previous + json.dumps(record) + "\n")


def _parsed(line):
    try:
        return json.loads(line)
    except ValueError:
        return None


def _untimed(record):
    return {k: v for k, v in record.items() if k != "time"} if isinstance(record, dict) else record


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
    Returns the path of config.yml.

    The history is written first: a run killed between the two writes leaves config.yml as it was,
    so the same command finds the same change again and completes both (the line is not doubled).
    The other order would leave a config.yml whose change the history never records."""
    path = os.path.join(cfg.OUTPUT_DIR, CONFIG_FILE)
    try:
        _append(cfg.OUTPUT_DIR, record)
        save_config(cfg, path)
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
