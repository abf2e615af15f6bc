"""The file ``last_checkpoint`` in a run folder: it names the latest training checkpoint, relative to
OUTPUT_DIR, and is written only once that checkpoint is complete. What it names, what is wrong with it
when it names none, its stamp that every training checkpoint records, and the complete checkpoint of a
save cut short before it could name it."""
import os

from ...utils.checkpoint_file import FINAL, LAST_CHECKPOINT, MARKER_FIELD
from .inventory import _read_or_none, _same_file, training_checkpoints
from .progress import _misnamed, progress_of_name, recorded_progress


def last_checkpoint_file(save_dir):
    """(path, problem): the checkpoint that ``save_dir``/last_checkpoint names (or the complete one
    whose save was cut short before the marker could name it, :func:`unmarked_save`), or, when that file
    cannot name one (not UTF-8, empty, naming a missing file or a folder), None and what is wrong
    with it; (None, None) where there is no last_checkpoint."""
    path, problem = marked_file(save_dir)
    if path is not None:
        cut = unmarked_save(save_dir, path)
        if cut is not None:
            return cut, None
    return path, problem


def marked_file(save_dir):
    """(path, problem) of what ``save_dir``/last_checkpoint names, as :func:`last_checkpoint_file` says
    it, without looking past it for a later save."""
    marker = os.path.join(save_dir, LAST_CHECKPOINT) if save_dir else ""
    if not (marker and os.path.lexists(marker)):
        return None, None
    if os.path.isdir(marker):
        return None, f"{marker} is a folder, not the file that names the latest checkpoint"
    try:
        with open(marker, "rb") as f:
            data = f.read(4096)
    except OSError as e:
        return None, f"{marker} cannot be read ({e.strerror or e})"
    try:
        name = data.decode("utf-8").strip()
    except UnicodeDecodeError as e:
        return None, (f"{marker} is not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); it should hold "
                      f"the file name of the latest checkpoint")
    if not name:
        return None, f"{marker} is empty; it should hold the file name of the latest checkpoint"
    # Relative names keep a moved output folder resumable; old absolute ones still work.
    path = name if os.path.isabs(name) else os.path.join(save_dir, name)
    if not os.path.isfile(path):
        what = "a folder" if os.path.isdir(path) else "not there"
        return None, f"{marker} names {name!r}, which is {what}"
    return path, None


def last_checkpoint(save_dir):
    """Path of the latest checkpoint in ``save_dir`` (what its last_checkpoint file names), or None
    (no last_checkpoint, or one that names no file: :func:`latest_checkpoint` says why and falls back)."""
    return last_checkpoint_file(save_dir)[0]


def marker_stamp(save_dir):
    """What ``save_dir``/last_checkpoint is now: {"text", "size", "mtime_ns"}, None where there is none or
    it cannot be read. Every training checkpoint records it as it is saved (MARKER_FIELD)."""
    try:
        with open(os.path.join(save_dir, LAST_CHECKPOINT), "rb") as f:
            stat = os.fstat(f.fileno())
            data = f.read(4096)
    except OSError:
        return None
    # the inode and the change time too: a copy of an old marker put back with its times kept (cp -p) is
    # a new file, with a change time no one can set back
    return {"text": data.decode("utf-8", "replace"), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns,
            "inode": stat.st_ino, "ctime_ns": stat.st_ctime_ns}


def unmarked_save(save_dir, marked):
    """The complete training checkpoint whose save was cut short before last_checkpoint could name it;
    None where there is none.

    A save renames its checkpoint into place, then writes last_checkpoint: a kill between the two
    leaves the marker naming ``marked``, the checkpoint before. The later one is taken when it is the
    latest in training and records that last_checkpoint was exactly as it is now (its text and
    modification time) when it was saved, so that nothing has written the marker since. A marker set
    back by hand to an earlier checkpoint does not match: :func:`latest_checkpoint` refuses it."""
    # model_final.pth says its point in training in its fields: a finished run continued to more epochs
    marked_progress = progress_of_name(os.path.basename(marked)) or recorded_progress(_read_or_none(marked))
    if marked_progress is None or not _named_later(save_dir, marked_progress):
        return None  # cheap, from the names alone: most often nothing was saved after the marked file
    found = training_checkpoints(save_dir)
    progress, path = found[0] if found else (None, None)
    if path is None or _same_file(path, marked):
        return None
    if progress < marked_progress or (progress == marked_progress and os.path.basename(path) != FINAL):
        return None
    checkpoint = _read_or_none(path)
    recorded = checkpoint.get(MARKER_FIELD) if isinstance(checkpoint, dict) else None
    if not recorded or recorded != marker_stamp(save_dir) or _misnamed(path, checkpoint):
        return None
    return path


def _named_later(save_dir, progress):
    """Whether ``save_dir`` holds a checkpoint whose name says it is later than ``progress``, or a
    model_final.pth (which only its fields place)."""
    for name in os.listdir(save_dir):
        named = progress_of_name(name)
        if name == FINAL or (named is not None and named > progress):
            return True
    return False
