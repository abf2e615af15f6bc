"""Keeping freed CPU memory in the process for the next training step (glibc's malloc).

A training step frees and allocates the same tensors every iteration. By default
glibc gives large freed blocks back to the system (it unmaps them, or trims the
top of its heap) and the next allocation of that size faults its pages in again,
each one zeroed by the kernel first: on the CPU that is time spent in the kernel
on every step, and how much depends on the sizes of the tensors, not on the
work. Fixing the mapping threshold at its maximum (32 MB) and never trimming
keeps blocks up to that size in the heap for reuse; larger blocks are still
mapped and unmapped each time. The price: the process's resident memory stays at
a step's peak between steps instead of dropping.
"""
import ctypes
import platform

M_TRIM_THRESHOLD = -1  # mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_MAX = 4 * 1024 * 1024 * ctypes.sizeof(ctypes.c_long)  # glibc's upper limit: 32 MB on 64-bit
NEVER = 2 ** 31 - 1  # mallopt takes an int: the largest trim threshold it accepts

_kept = False


def keeps_freed_memory():
    """Whether :func:`keep_freed_memory` has taken effect in this process."""
    return _kept


def keep_freed_memory():
    """Make glibc keep freed memory (once per process; the settings also pass to forked
    workers). Returns whether it now does: False where the C library is not glibc."""
    global _kept
    if _kept:
        return True
    if platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL(None)
    # Setting either disables glibc's own adjustment of both, so both are set.
    _kept = bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX)) and bool(libc.mallopt(M_TRIM_THRESHOLD, NEVER))
    return _kept
