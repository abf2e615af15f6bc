"""Atomic file writes: a crash mid-write leaves the previous file intact.

Data goes to a temporary file in the destination folder, is flushed and
synced, then renamed over the destination (rename is atomic on POSIX).
"""
import os
import tempfile


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _atomic_write(path, write, mode):
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=folder)
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual permissions
        with os.fdopen(fd, mode) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:  # make the rename itself durable
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass


def atomic_write_text(path, text):
    _atomic_write(path, lambda f: f.write(text), "w")


def atomic_write_bytes(path, data):
    _atomic_write(path, lambda f: f.write(data), "wb")


def atomic_torch_save(obj, path):
    import torch

    _atomic_write(path, lambda f: torch.save(obj, f), "wb")
