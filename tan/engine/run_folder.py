"""OUTPUT_DIR of a training run: created, locked for this run alone, and its
config.yml compared with the config of this run, all before anything is written.

docs/checkpoints.md §6 describes the rules; docs/training.md the flag.
"""
import os
from dataclasses import dataclass, field

from ..config import load_config
from ..config.compare import config_changes
from ..config.history import CONFIG_FILE, HISTORY_FILE
from ..errors import TanError
from ..utils.io import clear_abandoned_temporaries
from ..utils.run_lock import RunLock, describe_holder

ACCEPT_FLAG = "--accept-config-changes"


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

    def abandon(self):
        """This run stops before it started: unlock, and remove OUTPUT_DIR if this run made it and left it empty."""
        self.lock.release()
        _remove_if_empty(self.path, self.created)

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
