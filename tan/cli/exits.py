"""How a tool ends: the exceptions of tan/errors.py become a message and an exit code.

0 done; 2 a user error (TanError); 3 the loss diverged; 4 a peer process
failed or hung; 128 + N stopped by signal N after saving a checkpoint.
"""
import sys

from ..errors import NonFiniteLossError, TanError, TrainingInterrupted
from ..utils import comm
from ..utils.logger import get_logger

EXIT_USER_ERROR = 2
EXIT_DIVERGED = 3
EXIT_PEER_FAILED = 4


def _report(level, error):
    logger = get_logger()
    if logger.handlers:  # logging is set up: the console and log.txt
        getattr(logger, level)("%s", error)
    else:
        print(f"{level}: {error}", file=sys.stderr)


def run_cli(main):
    """Run ``main()``; known failures end with a one-line message and their exit code."""
    try:
        main()
    except TanError as e:
        _report("error", e)
        sys.exit(EXIT_USER_ERROR)
    except NonFiniteLossError as e:
        _report("critical", e)
        sys.exit(EXIT_DIVERGED)
    except TrainingInterrupted as e:
        _report("warning", e)
        sys.exit(128 + e.signum)  # the shell's convention for "ended by this signal"
    except RuntimeError as e:
        if not comm.is_communication_failure(e):
            raise
        _report("error", f"distributed communication failed on rank {comm.get_rank()}: a peer process stopped or "
                         f"did not answer within DISTRIBUTED.TIMEOUT ({type(e).__name__}: {e})")
        sys.exit(EXIT_PEER_FAILED)
    finally:
        comm.shutdown()
