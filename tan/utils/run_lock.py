"""One training run per OUTPUT_DIR: an exclusive lock on OUTPUT_DIR/run.lock.

The lock is an advisory ``flock`` on that file, so the kernel releases it
whenever its holder ends, even by SIGKILL; the file itself names the holder
(host, pid, start time, command) for the message a second run gets. A file
left by a holder that is gone (killed, crashed) is therefore recognised by
its lock being free and taken over. On a file system without ``flock`` the
holder's pid decides, on the same host. Removing the file at exit keeps a
finished folder clean; a run that finds the file replaced under it (a
concurrent exit) simply tries again.
"""
import atexit
import datetime
import errno
import fcntl
import json
import os
import socket
import sys

from ..errors import TanError
from .io import writer_alive

LOCK_FILE = "run.lock"


def describe_holder(holder):
    """'pid 123 on host h, started 2026-11-30 12:00:01 (python tools/train_net.py ...)'."""
    if not holder:
        return "an unknown process"
    return (f"pid {holder.get('pid', '?')} on host {holder.get('host', '?')}, started {holder.get('started', '?')}"
            f" ({holder.get('command', '?')})")


class RunLock:
    """``acquire()`` takes the folder's lock or raises TanError naming the
    holder; ``release()`` (also run at exit) gives it back."""

    def __init__(self, folder):
        self.folder = folder
        self.path = os.path.join(folder, LOCK_FILE)
        self.fd, self.owner = None, None
        self.taken_over = None  # the holder described by a stale lock file, if one was taken over

    def _read_holder(self, fd):
        try:
            os.lseek(fd, 0, os.SEEK_SET)
            holder = json.loads(os.read(fd, 65536).decode() or "null")
            return holder if isinstance(holder, dict) else None
        except (OSError, ValueError, UnicodeDecodeError):
            return None

    def _lock(self, fd):
        """True when this process now holds ``fd``'s lock; False when another live run does."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False
        except OSError as e:
            if e.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                raise
        # No flock here (some network file systems): a holder on this host is asked
        # through its pid; one on another host cannot be, so it is taken as alive.
        holder = self._read_holder(fd)
        if not holder:
            return True
        if holder.get("host") != socket.gethostname():
            return False
        pid = holder.get("pid")
        return pid == os.getpid() or not (isinstance(pid, int) and writer_alive(pid))

    def _open_locked(self):
        """The lock file's descriptor, locked by us, and still the file at ``self.path``."""
        for _ in range(10):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            if not self._lock(fd):
                holder = self._read_holder(fd)
                os.close(fd)
                raise TanError(f"OUTPUT_DIR {self.folder!r} is in use by another run: {describe_holder(holder)}. "
                               f"Wait for it to end or stop it, or give this run another OUTPUT_DIR")
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                return fd
            os.close(fd)  # the holder removed the file as we opened it: lock the new one
        raise TanError(f"cannot take the lock {self.path}: the file keeps changing under this run")

    def acquire(self):
        fd = self._open_locked()
        self.taken_over = self._read_holder(fd)  # a leftover of a holder that is gone
        record = {"pid": os.getpid(), "host": socket.gethostname(),
                  "started": datetime.datetime.now().isoformat(sep=" ", timespec="seconds"),
                  "command": " ".join(sys.argv)}
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)
            os.fsync(fd)
        except OSError as e:
            self.fd, self.owner = fd, os.getpid()
            self.release()
            raise TanError(f"cannot write {self.path}: {e.strerror or e}") from None
        self.fd, self.owner = fd, os.getpid()
        _HELD.add(self)
        atexit.register(self.release)
        return self

    def release(self):
        """Remove the file, then unlock (in this order, so a waiting run that gets
        the old file sees that it was replaced and tries again)."""
        if self.fd is None or self.owner != os.getpid():
            return
        try:
            os.unlink(self.path)
        except OSError:
            pass
        os.close(self.fd)  # closing releases the flock
        self.fd = None
        _HELD.discard(self)

    def forget(self):
        """In a forked child: drop the inherited descriptor without unlocking, so
        that children (DataLoader workers) that outlive a killed holder do not
        keep the folder locked."""
        if self.fd is not None:
            os.close(self.fd)
        self.fd = None


_HELD = set()  # the locks this process holds


def _forget_in_child():
    for lock in list(_HELD):
        lock.forget()
    _HELD.clear()


os.register_at_fork(after_in_child=_forget_in_child)
