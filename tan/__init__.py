"""tan: config-driven training and evaluation of 2D-TAN for temporal video grounding."""

__version__ = "0.1.0"
