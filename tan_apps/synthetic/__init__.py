"""Generated data: the built-in synthetic dataset of clip features (features.py, registered as
the catalog's "synthetic" generator: written under DATASETS.ROOT on first use) and the
synthetic video files (videos.py, tan-synthetic-videos)."""
from . import features  # noqa: F401  (registers the generator)
