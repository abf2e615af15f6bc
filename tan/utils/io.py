"""Atomic file writes: a crash mid-write leaves the previous file intact.

Data goes to a temporary file in the destination folder, is flushed and
synced, then renamed over the destination (rename is atomic on POSIX). A
folder is written as a temporary folder beside its destination and swapped
in when complete. What a writer killed outright left behind is cleared by
the next process that writes into the same folder (:func:`_sweep_once`).
"""
import hashlib
import json
import os
import shutil
import socket
import tempfile
from contextlib import contextmanager

from ..errors import TanError
from .held_signals import signals_held


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _atomic_write(path, write, mode):
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    _sweep_once(folder)
    fd, tmp = tempfile.mkstemp(prefix=_temporary_prefix(os.path.basename(path)), suffix=".tmp", dir=folder)
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


# Temporaries are named ".NAME.PID-HOST.XXXXXX.tmp": the writer's pid, so that a clean-up
# can tell a live writer's file from a leftover, and a tag of its host, so that a
# folder shared by several machines never loses another machine's live temporary
# (whose pid means nothing here).
HOST_TAG = hashlib.sha1(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:8]
_OLD = ".old"  # the suffix of a folder moved aside while a new one is swapped in (_swap_in)


def _temporary_prefix(name):
    return f".{name}.{os.getpid()}-{HOST_TAG}."


def temporary_writer(name):
    """For a file name of this module's temporaries, the writer's pid when it ran on
    this host (".NAME.PID-HOST.XXXXXX.tmp"; older versions wrote ".NAME.PID.XXXXXX.tmp",
    taken as this host's), 0 for such a name without a pid; None for any other name
    and for another host's temporaries."""
    if not (name.startswith(".") and name.endswith(".tmp")):
        return None
    parts = name[:-len(".tmp")].rsplit(".", 2)
    if len(parts) != 3:
        return 0
    pid, _, host = parts[1].partition("-")
    if not pid.isdigit():
        return 0
    if host and host != HOST_TAG:
        return None
    return int(pid)


def writer_alive(pid):
    """Whether process ``pid`` (on this host) still runs."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def _abandoned(entry, unknown_writers):
    """Whether ``entry`` is a temporary of this module's (or a folder a swap moved aside)
    whose writer is gone from this host; one that names no writer counts with ``unknown_writers``."""
    pid = temporary_writer(entry[:-len(_OLD)] if entry.endswith(".tmp" + _OLD) else entry)
    if pid is None:
        return False
    if pid == 0:
        return unknown_writers
    return pid != os.getpid() and not writer_alive(pid)


def _legacy_abandoned(name, entry):
    """Whether ``entry`` is "NAME.PID.tmp", as replaced_when_done named its files before, of a gone writer."""
    rest = entry[len(name) + 1:] if entry.startswith(f"{name}.") else ""
    pid = rest[:-len(".tmp")] if rest.endswith(".tmp") else ""
    return pid.isdigit() and int(pid) != os.getpid() and not writer_alive(int(pid))


def _clear(folder, entry):
    """Remove ``entry`` of ``folder``; a folder moved aside by a swap that was killed before the
    new folder took its place is put back instead. Returns what was done, or None."""
    full = os.path.join(folder, entry)
    try:
        if entry.endswith(".tmp" + _OLD):
            original = os.path.join(folder, entry[1:-len(".tmp" + _OLD)].rsplit(".", 2)[0])
            if not os.path.lexists(original):
                os.rename(full, original)
                return f"put {full} back as {original}"
        if os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full)
        else:
            os.unlink(full)
        return f"removed {full}"
    except OSError:
        return None


def clear_abandoned_temporaries(folder, name=None, unknown_writers=False):
    """Clear what writers that are gone (killed by SIGKILL, a crash, a power cut) left in
    ``folder``: the temporary files and folders of this module's writes (of file or folder
    ``name`` only, when given; a folder that a killed swap had moved aside is put back where
    its destination is missing). A live writer's temporaries, and another host's, are kept;
    those that name no writer (older versions') are cleared only with ``unknown_writers``,
    for a caller that holds the folder alone. Returns [(entry, what was done)], by name."""
    try:
        entries = sorted(os.listdir(folder))
    except OSError:
        return []
    done = []
    for entry in entries:
        if name is None or entry.startswith(f".{name}."):
            ours = _abandoned(entry, unknown_writers)
        else:
            ours = _legacy_abandoned(name, entry)
        what = _clear(folder, entry) if ours else None
        if what:
            done.append((entry, what))
    return done


def clear_abandoned_temporaries_of(path):
    """:func:`clear_abandoned_temporaries` of what writers of ``path`` left beside it.
    Returns what was done, one line each."""
    folder, name = os.path.split(os.path.abspath(path))
    return [what for _, what in clear_abandoned_temporaries(folder, name)]


_SWEPT = set()  # folders this process has cleared of abandoned temporaries


def _sweep_once(folder):
    """Before this process's first write into ``folder``: clear the temporaries that
    gone writers left there (of any file), so that no killed run's leftovers stay."""
    if folder not in _SWEPT:
        _SWEPT.add(folder)
        clear_abandoned_temporaries(folder)


@contextmanager
def temporary_beside(path):
    """A temporary path beside ``path`` (its folder made if need be; ".NAME.PID-HOST.XXXXXX.tmp",
    as temporary_writer reads it, so that one a killed writer left is cleared later), removed
    when the block ends if it is still there: for a writer that publishes it itself."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    _sweep_once(folder)
    fd, tmp = tempfile.mkstemp(prefix=_temporary_prefix(os.path.basename(path)), suffix=".tmp", dir=folder)
    os.close(fd)
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual permissions
        yield tmp
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass


@contextmanager
def replaced_when_done(path):
    """For files written by a library that wants a path (h5py): yields a temporary
    path beside ``path`` (:func:`temporary_beside`), renamed over it when the block
    ends normally and removed when it raises (Ctrl-C, or SIGTERM in a tool,
    included), so no half-written file remains."""
    with temporary_beside(path) as tmp:
        yield tmp
        os.replace(tmp, path)
    sync_folder(os.path.dirname(os.path.abspath(path)))  # make the rename itself durable


@contextmanager
def folder_replaced_when_done(path):
    """The same for a folder: yields a temporary folder beside ``path``
    (".NAME.PID-HOST.XXXXXX.tmp", as temporary_writer reads it), put at ``path``
    when the block ends normally and deleted when it raises (Ctrl-C
    included). A folder already at ``path`` is replaced."""
    parent, name = os.path.split(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    _sweep_once(parent)
    tmp = tempfile.mkdtemp(prefix=_temporary_prefix(name), suffix=".tmp", dir=parent)
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
    old = new + _OLD
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


def read_named_text(path, source):
    """The text of the UTF-8 file a user named (a byte-order mark is dropped); TanError
    naming ``source`` when it is a folder, missing, unreadable, or not UTF-8."""
    data = read_named_file(path, source)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise TanError(f"{source} is not UTF-8 text (byte 0x{data[e.start]:02x} on line {line}); save it as "
                       f"UTF-8") from None


def read_json_lines(path, source):
    """The records of the UTF-8 JSON-lines file ``path`` (blank lines skipped); TanError naming
    ``source`` ("metrics file 'OUT/metrics.jsonl'") and the line when one is not JSON."""
    records = []
    for number, line in enumerate(read_named_text(path, source).splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except ValueError as e:
                raise TanError(f"{source}, line {number}: not a JSON line ({e}); damaged?") from None
    return records


def read_json(path, source):
    """The data of the UTF-8 JSON file ``path``; TanError naming ``source`` when it is not JSON."""
    try:
        return json.loads(read_named_text(path, source))
    except ValueError as e:
        raise TanError(f"{source} is not JSON ({e}); damaged?") from None


def atomic_write_text(path, text):
    _atomic_write(path, lambda f: f.write(text), "w")


def atomic_write_bytes(path, data):
    _atomic_write(path, lambda f: f.write(data), "wb")


def atomic_torch_save(obj, path):
    import torch

    _atomic_write(path, lambda f: torch.save(obj, f), "wb")
