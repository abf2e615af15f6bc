"""How a tool ends: the exceptions of tan/errors.py become a message and an exit code.

0 done; 2 a user error (TanError); 3 the loss diverged; 4 a peer process
failed or hung; 128 + N stopped by signal N (in training, after saving a
checkpoint); 130 for Ctrl-C at any moment (tan/cli/interrupts.py).
"""
import sys

from ..errors import NonFiniteLossError, TanError, TrainingInterrupted
from ..utils import comm
from ..utils.logger import get_logger
from . import interrupts

EXIT_USER_ERROR = 2
EXIT_DIVERGED = 3
EXIT_PEER_FAILED = 4


def _report(level, error):
    logger = get_logger()
    if logger.handlers:  # logging is set up: the console and log.txt
        getattr(logger, level)("%s", error)
    else:
        print(f"{level}: {error}", file=sys.stderr)


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
    if isinstance(error, KeyboardInterrupt):
        return "warning", interrupts.message(), interrupts.EXIT_INTERRUPTED
    if isinstance(error, RuntimeError) and comm.is_communication_failure(error):
        return "error", _peer_failure(error), EXIT_PEER_FAILED
    return None


def run_cli(main):
    """Run ``main()``; known failures end with a one-line message and their exit code."""
    try:
        with interrupts.guarded():
            main()
    except (TanError, NonFiniteLossError, TrainingInterrupted, KeyboardInterrupt, RuntimeError) as e:
        ending = _ending(e)
        if ending is None:
            raise
        level, message, code = ending
        if isinstance(e, (TrainingInterrupted, KeyboardInterrupt)):
            interrupts.mark_reported()
        _report(level, message)
        sys.exit(code)
    finally:
        comm.shutdown()
