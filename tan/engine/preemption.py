"""Preemption: SIGTERM or SIGINT asks the training loop to stop at the next
point where every process can agree, save a resumable checkpoint and exit."""
import signal

from tan.utils import comm


class PreemptionFlag:
    """Installs SIGTERM / SIGINT handlers while active; remembers the first signal."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self):
        self.signum = None
        self._previous = {}

    def __enter__(self):
        for sig in self.SIGNALS:
            try:
                self._previous[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread: leave signals alone
                pass
        return self

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
        return False

    def _handle(self, signum, frame):
        if self.signum is None:
            self.signum = signum

    def raised(self):
        """The signal seen by any rank (0: none). Every rank must call this at
        the same iterations: one tiny all-reduce when distributed."""
        if not comm.is_dist():
            return self.signum or 0
        return comm.reduce_max_int(self.signum or 0)
