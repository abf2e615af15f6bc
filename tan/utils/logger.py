"""Logging to stdout and OUTPUT_DIR/log.txt on rank 0; other ranks warn only."""
import logging
import os
import sys

from .progress import TqdmAwareHandler

LOGGER_NAME = "tan"
_log_file = None  # the LogFileHandler of the last setup_logger call, if any


class LogFileHandler(logging.FileHandler):
    """log.txt. A write that fails (disk full, quota) switches the file off with
    one console warning, instead of logging's traceback for every later line;
    ``failure`` keeps the error, so that a tool can stop when it happens at start."""

    failure = None

    def handleError(self, record):
        error = sys.exc_info()[1]
        if not isinstance(error, OSError):
            super().handleError(record)
            return
        self.failure = error
        logger = logging.getLogger(LOGGER_NAME)
        logger.removeHandler(self)
        logger.warning("cannot write %s (%s); the log continues on the console only",
                       self.baseFilename, error.strerror or error)


def setup_logger(output_dir=None, rank=0, filename="log.txt", stream=None):
    """``stream``: console stream (default stdout; tools whose stdout is data log to stderr)."""
    logger = logging.getLogger(LOGGER_NAME)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    for h in list(logger.handlers):  # idempotent when called twice (tests, resume)
        logger.removeHandler(h)
        h.close()
    fmt = logging.Formatter("%(asctime)s %(name)s %(levelname)s: %(message)s", datefmt="%Y-%m-%d %H:%M:%S")
    console = TqdmAwareHandler(stream=stream or sys.stdout)
    console.setFormatter(fmt)
    console.setLevel(logging.INFO if rank == 0 else logging.WARNING)
    logger.addHandler(console)
    global _log_file
    _log_file = None
    if rank == 0 and output_dir:
        os.makedirs(output_dir, exist_ok=True)
        _log_file = LogFileHandler(os.path.join(output_dir, filename))
        _log_file.setFormatter(fmt)
        _log_file.setLevel(logging.DEBUG)
        logger.addHandler(_log_file)
    return logger


def close_log_file(path):
    """Stop logging to the file ``path`` (closed, and no longer the log file): the console goes on alone."""
    global _log_file
    logger = logging.getLogger(LOGGER_NAME)
    for handler in list(logger.handlers):
        if isinstance(handler, logging.FileHandler) and os.path.abspath(handler.baseFilename) == os.path.abspath(path):
            logger.removeHandler(handler)
            handler.close()
            if handler is _log_file:
                _log_file = None


def log_file_failure():
    """(path, OSError) of a log file that could not be written since setup_logger, else None."""
    if _log_file is None or _log_file.failure is None:
        return None
    return _log_file.baseFilename, _log_file.failure


def get_logger(name=None):
    return logging.getLogger(LOGGER_NAME if name is None else f"{LOGGER_NAME}.{name}")
