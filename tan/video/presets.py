"""The benchmarks' released features, one preset each: which streams, their
clip length, and how the files store them, as HERO's extractor made them.

Every release of the lighthouse layout has, per video, a CLIP ViT-B/32 row
per clip (``clip/``, 512 wide), a SlowFast R50 8x8 row per clip
(``slowfast/``, 2304 wide), and per query CLIP's token features
(``clip_text/``): float16 ``.npz`` files, ``features`` for a video,
``last_hidden_state`` and ``pooler_output`` for a query. The releases differ
in their clip length.
"""
from dataclasses import dataclass

from ..errors import TanError
from .release_sampling import ReleaseSampling


@dataclass(frozen=True)
class Stream:
    folder: str  # the release's folder name of the stream
    backbone: str  # the registered video backbone that makes it
    kind: str  # its ReleaseSampling kind


@dataclass(frozen=True)
class Release:
    name: str
    clip_seconds: int
    text_folder: str = "clip_text"
    text_tokens: int = 32  # Moment-DETR's extraction keeps the start token, 30 tokens and the end token
    storage: str = "float16"
    streams: tuple = (Stream("clip", "clip", "images"), Stream("slowfast", "slowfast", "clips"))

    def sampling(self, stream, resolution, scaler):
        return ReleaseSampling(stream.kind, self.clip_seconds, resolution, scaler)


PRESETS = {
    "qvhighlights": Release("qvhighlights", 2),  # Moment-DETR's release (and lighthouse's copy of it)
    "charades": Release("charades", 1),  # lighthouse's Charades-STA
    # lighthouse's TACoS reads up to 100 tokens of a query, so its files were not cut at 32: CLIP's whole
    # context (77) is kept
    "tacos": Release("tacos", 2, text_tokens=77),
    "activitynet": Release("activitynet", 2),  # lighthouse's ActivityNet Captions
}


def preset(name):
    if name not in PRESETS:
        raise TanError(f"--preset {name!r}: expected one of {', '.join(sorted(PRESETS))}")
    return PRESETS[name]
