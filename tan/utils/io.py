"""Atomic file writes: a crash mid-write leaves the previous file intact.

Data goes to a temporary file in the destination folder, is flushed and
synced, then renamed over the destination (rename is atomic on POSIX).
"""
import os
import tempfile
from contextlib import contextmanager


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _atomic_write(path, write, mode):
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    # The writer's pid is in the name, so a clean-up can tell a live writer's file from a leftover.
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.{os.getpid()}.", suffix=".tmp", dir=folder)
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual permissions
        with os.fdopen(fd, mode) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        failed = _failed_write(e)
        if failed is None:
            raise
        if failed.filename is None:  # say which file could not be written
            failed.filename = path
        if failed is not e:
            raise failed from e  # the OSError says what went wrong; torch's wrapper does not
        raise
    sync_folder(folder)  # make the rename itself durable


def sync_folder(folder):
    """fsync a folder, so that renames and new entries in it survive a crash;
    best effort (some file systems cannot sync a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


def os_error_in(error):
    """The OSError behind ``error``: itself, or one it was raised ``from``
    (explicit causes only: an error that merely happened while handling an
    OSError is a bug of its own and must keep its traceback)."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, OSError):
            return error
        seen.add(id(error))
        error = error.__cause__
    return None


def _failed_write(error):
    """The OSError of a write that failed: the error itself, or the one torch.save
    was handling when it raised its own RuntimeError ("[enforce fail at
    inline_container.cc] ... unexpected pos" on a full disk)."""
    if isinstance(error, OSError):
        return error
    if isinstance(error, RuntimeError) and isinstance(error.__context__, OSError):
        return error.__context__
    return None


def temporary_writer(name):
    """For a file name of this module's temporaries (".NAME.PID.XXXXXX.tmp"), the
    writer's pid (0 for a name without one, as older versions wrote); None for
    any other name."""
    if not (name.startswith(".") and name.endswith(".tmp")):
        return None
    parts = name[:-len(".tmp")].rsplit(".", 2)
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else 0


@contextmanager
def replaced_when_done(path):
    """For files written by a library that wants a path (h5py): yields a temporary
    path beside ``path``, renamed over it when the block ends normally and
    removed when it raises (Ctrl-C included), so no half-written file remains."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_text(path, text):
    _atomic_write(path, lambda f: f.write(text), "w")


def atomic_write_bytes(path, data):
    _atomic_write(path, lambda f: f.write(data), "wb")


def atomic_torch_save(obj, path):
    import torch

    _atomic_write(path, lambda f: torch.save(obj, f), "wb")
