"""DOT_MAP: a small grounding model that lives outside the tan package.

Importing this package registers the model (``PLUGINS: ["projects/dot_map"]``
in a config). It is the worked example of docs/models.md: copy the folder,
rename the model, and change what you need.
"""
from .model import DotMap

__all__ = ["DotMap"]
