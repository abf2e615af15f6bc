"""MS-2D-TAN (Zhang et al., TPAMI 2021), MODEL.ARCHITECTURE "MS_TAN" (docs/ms2dtan.md)."""
from . import data_layout  # noqa: F401  (its data layout's dataset names and TACoS format)
from .model import MultiScaleTAN

__all__ = ["MultiScaleTAN"]
