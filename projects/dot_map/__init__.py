"""DOT_MAP: a small grounding model that lives outside the tan package.

Importing this package registers the model and its trainer
(``PLUGINS: ["projects/dot_map"]`` in a config). It is the worked example of
docs/models.md and docs/training.md: copy the folder, rename the model, and
change what you need.
"""
from .model import DotMap
from .trainer import DotMapTrainer

__all__ = ["DotMap", "DotMapTrainer"]
