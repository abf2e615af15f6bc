"""Generated data: the built-in synthetic dataset of clip features (features.py, registered as
the catalog's "synthetic" generator: written under DATASETS.ROOT on first use), its long videos
(long_videos.py, the "synthetic_long" generator) and the
synthetic video files (videos.py, tan-synthetic-videos)."""
from . import features, long_videos  # noqa: F401  (register the generators)
