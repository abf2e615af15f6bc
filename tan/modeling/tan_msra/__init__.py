"""microsoft/2D-TAN, the paper's own code, as MODEL.ARCHITECTURE "TAN_MSRA" (docs/tan_msra.md):
its released checkpoints and experiment files load into tan."""
from .model import TanMsra

__all__ = ["TanMsra"]
