"""Atomic file writes: a crash mid-write leaves the previous file intact.

Data goes to a temporary file in the destination folder, is flushed and
synced, then renamed over the destination (rename is atomic on POSIX). A
folder is written as a temporary folder beside its destination and swapped
in when complete.
"""
import os
import shutil
import tempfile
from contextlib import contextmanager

from ..errors import TanError
from .signals import signals_held


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


def writer_alive(pid):
    """Whether process ``pid`` (on this host) still runs."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def _temporary_of(name, entry):
    """The pid that wrote ``entry`` as a temporary of the file or folder ``name``, else None:
    ".NAME.PID.XXXXXX.tmp" (and the ".old" a folder swap moves aside), or "NAME.PID.tmp",
    as :func:`replaced_when_done` named its files before."""
    if entry.startswith(f".{name}.") and entry.endswith((".tmp", ".tmp.old")):
        pid = temporary_writer(entry[:-len(".old")] if entry.endswith(".old") else entry)
        return pid or None
    rest = entry[len(name) + 1:] if entry.startswith(f"{name}.") else ""
    return int(rest[:-len(".tmp")]) if rest.endswith(".tmp") and rest[:-len(".tmp")].isdigit() else None


def remove_abandoned_temporaries(path):
    """Remove what writers of ``path`` that are gone (killed by SIGKILL, a crash, a
    power cut) left beside it: the temporary files and folders of this module's
    atomic writes. A live writer's temporaries are kept. Returns the paths removed."""
    folder, name = os.path.split(os.path.abspath(path))
    try:
        entries = sorted(os.listdir(folder))
    except OSError:
        return []
    removed = []
    for entry in entries:
        pid = _temporary_of(name, entry)
        if pid is None or pid == os.getpid() or writer_alive(pid):
            continue
        full = os.path.join(folder, entry)
        try:
            if os.path.isdir(full) and not os.path.islink(full):
                shutil.rmtree(full)
            else:
                os.unlink(full)
            removed.append(full)
        except OSError:
            pass
    return removed


@contextmanager
def replaced_when_done(path):
    """For files written by a library that wants a path (h5py): yields a temporary
    path beside ``path`` (its folder made if need be; ".NAME.PID.XXXXXX.tmp", as
    temporary_writer reads it), renamed over it when the block ends normally and
    removed when it raises (Ctrl-C, or SIGTERM in a tool, included), so no
    half-written file remains."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.{os.getpid()}.", suffix=".tmp", dir=folder)
    os.close(fd)
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual permissions
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    sync_folder(folder)  # make the rename itself durable


@contextmanager
def folder_replaced_when_done(path):
    """The same for a folder: yields a temporary folder beside ``path``
    (".NAME.PID.XXXXXX.tmp", as temporary_writer reads it), put at ``path``
    when the block ends normally and deleted when it raises (Ctrl-C
    included). A folder already at ``path`` is replaced."""
    parent, name = os.path.split(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{name}.{os.getpid()}.", suffix=".tmp", dir=parent)
    try:
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes 0700; give the usual permissions
        yield tmp
        sync_folder(tmp)
        with signals_held():  # the two renames of a swap are never cut apart
            _swap_in(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    sync_folder(parent)


def _swap_in(new, path):
    """Put folder ``new`` at ``path``. A folder already there is moved aside first
    (a folder cannot be renamed over another that has files) and deleted once
    the new one is in place; moved back if the new one cannot be."""
    if not os.path.lexists(path):
        os.rename(new, path)
        return
    old = f"{new}.old"
    os.rename(path, old)
    try:
        os.rename(new, path)
    except BaseException:
        os.rename(old, path)
        raise
    if os.path.islink(old):  # PATH was a link to a folder: the link goes, not what it pointed to
        os.unlink(old)
    else:
        shutil.rmtree(old)


def read_named_file(path, source, size=-1):
    """The first ``size`` bytes (all: -1) of the file a user named; TanError naming
    ``source`` ("config file 'a.yaml'") when it is a folder, missing or unreadable."""
    if os.path.isdir(path):
        raise TanError(f"{source} is a folder; expected a file")
    if not os.path.exists(path):
        raise TanError(f"{source} not found")
    try:
        with open(path, "rb") as f:
            return f.read(size)
    except OSError as e:
        raise TanError(f"{source} cannot be read: {e.strerror or e}") from None


def atomic_write_text(path, text):
    _atomic_write(path, lambda f: f.write(text), "w")


def atomic_write_bytes(path, data):
    _atomic_write(path, lambda f: f.write(data), "wb")


def atomic_torch_save(obj, path):
    import torch

    _atomic_write(path, lambda f: torch.save(obj, f), "wb")
