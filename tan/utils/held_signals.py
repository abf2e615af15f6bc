"""SIGINT / SIGTERM held back over steps that must not be cut apart."""
import signal
import threading
from contextlib import contextmanager

HELD = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def signals_held():
    """Ctrl-C and SIGTERM received in the block take effect when it is done
    (normally or by an exception), reaching the handler that was in place as
    if they had just come: files that belong together (a test's metrics.json
    and predictions.jsonl) are written as a whole, the two renames that swap
    a folder in are never cut apart.

    Blocking the signals with pthread_sigmask would not do: another thread
    (torch's, OpenMP's) would take them and Python would still raise in the
    main thread. Only the main thread runs Python's signal handlers, so in
    any other thread the block runs as it is; a signal whose handler was set
    outside Python (getsignal gives None) is left alone."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = []
    previous = {}
    for signum in HELD:
        if signal.getsignal(signum) is not None:
            previous[signum] = signal.signal(signum, lambda number, frame: received.append(number))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in received:
            signal.raise_signal(signum)  # now, to the handler it was meant for
