"""How a tool ends: the exceptions of tan/errors.py become a message and an exit code.

0 done; 2 a user error (TanError), or a file that cannot be written (disk
full, read-only, no permission, a file where a folder should be: one line
naming the path); 3 the loss diverged; 4 a peer process failed or hung;
128 + N stopped by signal N (in training, after saving a checkpoint); 130
for Ctrl-C and 143 for SIGTERM at any moment (tan_apps/cli/signal_exits.py).
"""
import errno
import sys

from tan.errors import NonFiniteLossError, TanError, TrainingInterrupted
from tan.utils import comm
from tan.utils.io import os_error_in
from tan.utils.logger import get_logger
from tan_apps.cli import signal_exits

EXIT_USER_ERROR = 2
EXIT_DIVERGED = 3
EXIT_PEER_FAILED = 4

# Only writing fails this way.
WRITE_ERRNOS = frozenset(getattr(errno, name) for name in ("ENOSPC", "EDQUOT", "EROFS", "EFBIG", "EEXIST")
                         if hasattr(errno, name))
# Reading can fail this way too; either way the user has a path to fix.
ACCESS_ERRNOS = frozenset(getattr(errno, name) for name in ("EACCES", "EPERM", "ENOTDIR", "EISDIR", "EIO",
                                                            "ENAMETOOLONG") if hasattr(errno, name))


def _report(level, error):
    logger = get_logger()
    if logger.handlers:  # logging is set up: the console and log.txt
        getattr(logger, level)("%s", error)
    else:
        print(f"{level}: {error}", file=sys.stderr)


def file_access_error(error):
    """The OSError of a failed write (or read) behind ``error``: the error itself,
    or the one a RuntimeError wraps (torch.save on a full disk raises
    "[enforce fail at inline_container.cc] unexpected pos" while handling the
    OSError). None for anything else, which is a bug and keeps its traceback."""
    cause = os_error_in(error) if isinstance(error, (OSError, RuntimeError)) else None
    return cause if cause is not None and cause.errno in WRITE_ERRNOS | ACCESS_ERRNOS else None


def describe_file_access_error(error):
    """One line: "cannot write PATH: CAUSE" ("read or write" where reading fails alike)."""
    verb = "write" if error.errno in WRITE_ERRNOS else "read or write"
    path = error.filename if error.filename is not None else "a file (the system did not say which)"
    cause = error.strerror or str(error)
    if error.errno == errno.EEXIST:  # creating a folder where a file of that name is
        cause += " (a file is where a folder should be)"
    return f"cannot {verb} {path}: {cause}"


def _peer_failure(error):
    return (f"distributed communication failed on rank {comm.get_rank()}: a peer process stopped or did not answer "
            f"within DISTRIBUTED.TIMEOUT ({type(error).__name__}: {error})")


def _ending(error):
    """(log level, message, exit code) for an exception that ends a run on purpose; None for a bug."""
    if isinstance(error, TanError):
        return "error", error, EXIT_USER_ERROR
    if isinstance(error, NonFiniteLossError):
        return "critical", error, EXIT_DIVERGED
    if isinstance(error, TrainingInterrupted):
        return "warning", error, 128 + error.signum  # the shell's convention for "ended by this signal"
    if isinstance(error, KeyboardInterrupt):  # Ctrl-C, or SIGTERM (signal_exits.Terminated)
        return "warning", signal_exits.message(error), signal_exits.exit_code(error)
    if isinstance(error, RuntimeError) and comm.is_communication_failure(error):
        return "error", _peer_failure(error), EXIT_PEER_FAILED
    access = file_access_error(error)
    if access is not None:
        return "error", describe_file_access_error(access), EXIT_USER_ERROR
    return None


def run_cli(main):
    """Run ``main()``; known failures end with a one-line message and their exit code."""
    ended_normally = False
    try:
        with signal_exits.guarded():
            main()
        ended_normally = True
    except (TanError, NonFiniteLossError, TrainingInterrupted, KeyboardInterrupt, OSError, RuntimeError) as e:
        ending = _ending(e)
        if ending is None:
            raise
        level, message, code = ending
        if isinstance(e, (TrainingInterrupted, KeyboardInterrupt)):
            signal_exits.mark_reported()
        if getattr(e, "details", None):
            print(e.details.rstrip("\n"), file=sys.stderr)
        _report(level, message)
        sys.exit(code)
    finally:
        comm.shutdown(together=ended_normally)
