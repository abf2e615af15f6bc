"""Optional TensorBoard scalars (config TENSORBOARD), written on rank 0 only."""
import os

from ..errors import TanError


def tensorboard_available():
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        return False
    return True


def check_tensorboard(cfg):
    if cfg.TENSORBOARD and not tensorboard_available():
        raise TanError("TENSORBOARD is True but the tensorboard package is not installed: "
                       "pip install tensorboard (or pip install 'tan[tensorboard]'), or set TENSORBOARD False")


class ScalarWriter:
    """add_scalar(s) into OUTPUT_DIR/tensorboard/``folder`` when enabled; does nothing otherwise.
    ``purge_step``: the scalars of that step and later already in the folder are hidden from
    TensorBoard (a resumed run writes them again)."""

    def __init__(self, cfg, enabled, folder="", purge_step=None):
        self.writer = None
        if enabled and cfg.TENSORBOARD:
            from torch.utils.tensorboard import SummaryWriter
            self.writer = SummaryWriter(os.path.join(cfg.OUTPUT_DIR, "tensorboard", folder), purge_step=purge_step)

    def scalars(self, values, step, prefix=""):
        if self.writer is None:
            return
        for key, value in values.items():
            if isinstance(value, (int, float)) and value is not None:
                self.writer.add_scalar(prefix + key, value, step)
        self.writer.flush()

    def close(self):
        if self.writer is not None:
            self.writer.close()
