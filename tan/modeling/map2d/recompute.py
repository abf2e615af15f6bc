"""Activation checkpointing (MODEL.{NAME}.PREDICTOR.RECOMPUTE): a part of the
forward whose saved tensors are dropped once it has run and recomputed, with
the same operations on the same inputs, when the backward needs them. The
gradients are exactly those of the stored run."""
import contextlib

from torch.utils.checkpoint import checkpoint


class Recomputation:
    """Tells a module whether its forward is running a second time (the recomputation
    of a checkpointed part): state such as batch norm's running statistics must
    then be left alone."""

    def __init__(self):
        self.active = False

    @contextlib.contextmanager
    def running(self):
        self.active, before = True, self.active
        try:
            yield
        finally:
            self.active = before


def recomputed(fn, *args, recomputation=None):
    """``fn(*args)``, its saved tensors recomputed in the backward; ``recomputation``
    (a :class:`Recomputation`) is active while that happens, that is, in every call
    of ``fn`` after the first."""
    if recomputation is None:
        return checkpoint(fn, *args, use_reentrant=False, preserve_rng_state=False)
    calls = []

    def counted(*inputs):
        context = recomputation.running() if calls else contextlib.nullcontext()
        calls.append(True)
        with context:
            return fn(*inputs)
    return checkpoint(counted, *args, use_reentrant=False, preserve_rng_state=False)
