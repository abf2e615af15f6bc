"""Logging to stdout and OUTPUT_DIR/log.txt on rank 0; other ranks warn only."""
import logging
import os
import sys

from .progress import TqdmAwareHandler

LOGGER_NAME = "tan"


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
    if rank == 0 and output_dir:
        os.makedirs(output_dir, exist_ok=True)
        fh = logging.FileHandler(os.path.join(output_dir, filename))
        fh.setFormatter(fmt)
        fh.setLevel(logging.DEBUG)
        logger.addHandler(fh)
    return logger


def get_logger(name=None):
    return logging.getLogger(LOGGER_NAME if name is None else f"{LOGGER_NAME}.{name}")
