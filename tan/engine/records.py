"""The run's records: metrics.jsonl and the JSON-lines files of hooks, in OUTPUT_DIR, rank 0 only.

A checkpoint holds how many lines each record file had when it was saved. A run that resumes from
it cuts every record file back to that many lines before its first step: what happened after the
checkpoint (steps, a validation, a hook's lines) is done again by the resumed run and written
again, so each record is in its file once, in the order of an uninterrupted run. A file no
checkpoint knows (first written after the one resumed from) is emptied the first time it is
written to. Records written any other way are not taken back.
"""
import json
import os

from ..errors import TanError
from ..utils.io import atomic_write_bytes
from ..utils.logger import get_logger

METRICS = "metrics.jsonl"


def _count_lines(path):
    """Complete lines of ``path`` (0 when missing); a last line a killed writer left unfinished is not one."""
    if not os.path.isfile(path):
        return 0
    with open(path, "rb") as f:
        return sum(1 for line in f if line.endswith(b"\n"))


def _complete_lines(path):
    with open(path, "rb") as f:
        return [line for line in f if line.endswith(b"\n")]


def _replace_lines(path, lines):
    """``path`` now holds ``lines`` (atomic: a kill leaves it as it was or as it becomes)."""
    atomic_write_bytes(path, b"".join(lines))


def _cut_to_lines(path, lines):
    """Keep the first ``lines`` complete lines of ``path``."""
    _replace_lines(path, _complete_lines(path)[:lines])


def _append(path, record):
    """One more line; a write that fails (disk full) is cut back off, so the file never ends in
    half a record, and ends the run naming the file."""
    size = os.path.getsize(path) if os.path.exists(path) else 0
    try:
        with open(path, "a") as f:
            f.write(json.dumps(record) + "\n")
    except OSError as e:
        try:
            os.truncate(path, size)
        except OSError:
            pass
        raise TanError(f"cannot write {path}: {e.strerror or e}") from None


def _check_name(name):
    if not name or os.path.basename(name) != name or not name.endswith(".jsonl"):
        raise TanError(f"a record file is named like 'my_hook.jsonl' (a file in OUTPUT_DIR ending in .jsonl), "
                       f"not {name!r}")


class RunRecords:
    """Append JSON records to files of OUTPUT_DIR on rank 0 (``folder`` None elsewhere: nothing is
    written), resumable: :meth:`lengths` goes into every checkpoint and :meth:`rewind` takes the
    files back to a checkpoint's lengths."""

    def __init__(self, folder):
        self.folder = folder
        self.lines = {}  # file name -> complete lines it holds now, for the files this run knows
        self.rewound_to = None  # the lengths of the checkpoint resumed from, once rewound

    def path(self, name=METRICS):
        return os.path.join(self.folder, name) if self.folder else None

    def write(self, record, name=METRICS):
        """Append ``record`` (a JSON-serialisable dict) to OUTPUT_DIR/``name`` (rank 0; nothing elsewhere)."""
        _check_name(name)
        if not self.folder:
            return
        if name not in self.lines:
            self._open(name)
        _append(self.path(name), record)
        self.lines[name] += 1

    def _open(self, name):
        path = self.path(name)
        if self.rewound_to is not None and name not in self.rewound_to and os.path.isfile(path):
            # Not a record file at the checkpoint resumed from: whatever it holds came after it.
            _cut_to_lines(path, 0)
        self.lines[name] = _count_lines(path)

    def lengths(self, known=()):
        """{file name: lines} of every record file written so far, the ones of the checkpoint resumed
        from and the ``known`` names too: saved in a checkpoint."""
        if not self.folder:
            return {}
        for name in (METRICS, *(self.rewound_to or {}), *known):
            if name not in self.lines:
                self._open(name)
        return dict(self.lines)

    def withdraw(self):
        """Remove the record files this run wrote: it stopped before its first checkpoint, and the
        folder holds no run (tan.engine.run_folder)."""
        for name in list(self.lines):
            try:
                os.unlink(self.path(name))
            except FileNotFoundError:
                pass
        self.lines = {}

    def rewind(self, lengths, legacy_keep=None):
        """Cut every record file back to ``lengths`` (a checkpoint's :meth:`lengths`; {} for a run that
        starts afresh, which empties them). ``legacy_keep``: for a checkpoint saved before record
        lengths were, a test of which metrics.jsonl records to keep; then no other file is touched."""
        if not self.folder:
            return
        if lengths is None:
            if legacy_keep is not None:
                self._keep_legacy(legacy_keep)
            return
        self.rewound_to = dict(lengths)
        self.lines = {}
        cut = []
        names = set(lengths) | {METRICS}
        for name in sorted(names):
            path = self.path(name)
            have, keep = _count_lines(path), lengths.get(name, 0)
            if os.path.isfile(path) and (have > keep or os.path.getsize(path) and not _ends_in_newline(path)):
                _cut_to_lines(path, keep)
                cut.append(f"{name} ({have - min(have, keep)} after it)")
            self.lines[name] = min(have, keep)
        if cut:
            get_logger("trainer").info("records written after the checkpoint resumed from were taken back, to be "
                                       "written again: %s", ", ".join(cut))

    def _keep_legacy(self, keep):
        path = self.path(METRICS)
        if not os.path.isfile(path):
            return
        lines = _complete_lines(path)
        kept = []
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if keep(record):
                kept.append(line)
        if len(kept) < len(lines):
            _replace_lines(path, kept)
            get_logger("trainer").info("records written after the checkpoint resumed from were taken back, to be "
                                       "written again: %s (%d)", METRICS, len(lines) - len(kept))


def _ends_in_newline(path):
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def recorded_before(state):
    """For a checkpoint saved before the lengths of the records were (``state``: its
    tan.engine.state.TrainingState): which metrics.jsonl records came before it (training steps up
    to its iteration, validations of the epochs before the first one a resumed run validates)."""
    first_validated = state.epoch_to_close or state.epoch

    def keep(record):
        if "iteration" in record:
            return record["iteration"] <= state.iteration
        if "dataset" in record:
            return record.get("epoch", 0) < first_validated
        return True
    return keep
