"""Progress bars on rank 0 when the output is a terminal; plain log lines otherwise.

Bars go to stderr; while one is shown, console log lines are written through
tqdm so that they do not tear the bar apart.
"""
import logging
import os
import sys

from tqdm import tqdm

from . import comm


def bars_enabled():
    """Rank 0, stderr is a terminal, and TAN_PROGRESS is not "0"."""
    if os.environ.get("TAN_PROGRESS", "") == "0":
        return False
    return comm.is_main_process() and sys.stderr.isatty()


def progress(iterable, total=None, desc="", initial=0, unit="it"):
    """``iterable`` wrapped in a tqdm bar when bars are enabled, else unchanged."""
    if not bars_enabled():
        return iterable
    return tqdm(iterable, total=total, desc=desc, initial=initial, unit=unit, leave=False, dynamic_ncols=True,
                file=sys.stderr)


class TqdmAwareHandler(logging.StreamHandler):
    """A console handler that prints through ``tqdm.write`` so open bars stay intact."""

    def emit(self, record):
        try:
            tqdm.write(self.format(record), file=self.stream)
        except Exception:  # noqa: BLE001 - logging must never raise
            self.handleError(record)
