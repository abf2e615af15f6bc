"""Preemption: SIGTERM or SIGINT asks the loop to stop after the current
iteration, save a resumable checkpoint and exit."""
import signal

import torch

from ..utils import comm


class TrainingInterrupted(Exception):
    """Training stopped on a signal after saving ``checkpoint``."""

    def __init__(self, signum, checkpoint, epoch, iteration):
        self.signum, self.checkpoint = signum, checkpoint
        name = signal.Signals(signum).name
        super().__init__(f"interrupted by {name} in epoch {epoch} after iteration {iteration}; saved {checkpoint}. "
                         f"Run the same command again to resume from there.")


class InterruptFlag:
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
        return False

    def _handle(self, signum, frame):
        if self.signum is None:
            self.signum = signum

    def raised(self, device):
        """The signal seen by any rank (0: none). Every rank must call this at
        the same iterations: one tiny all-reduce when distributed."""
        if not comm.is_dist():
            return self.signum or 0
        flag = torch.tensor([self.signum or 0], device=comm.comm_device())
        torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
        return int(flag.item())
