"""2D-TAN (AAAI 2020), MODEL.ARCHITECTURE "TAN" (docs/model.md)."""
from .model import TAN

__all__ = ["TAN"]
