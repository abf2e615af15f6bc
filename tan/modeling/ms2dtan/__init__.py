"""MS-2D-TAN (Zhang et al., TPAMI 2021), MODEL.ARCHITECTURE "MS_TAN" (docs/ms2dtan.md)."""
from .model import MultiScaleTAN

__all__ = ["MultiScaleTAN"]
