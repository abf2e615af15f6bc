"""Annotation files -> one record per (video, moment, sentence).

Formats (DATA.md): "tacos" gives timestamps in frames with ``fps`` and
``num_frames``; "seconds" (ActivityNet Captions, Charades-STA JSON) gives
timestamps and ``duration`` in seconds. Bad records are dropped or clipped
and counted, never patched with another record's values.
"""
import json
import math
import os
from collections import Counter
from dataclasses import dataclass

from ..errors import TanError


@dataclass
class Query:
    video: str
    duration: float  # seconds
    start: float  # seconds, clipped to [0, duration]
    end: float
    sentence: str


def _video_duration(video, info, fmt):
    if fmt == "tacos":
        return float(info["num_frames"]) / float(info["fps"])
    return float(info["duration"])


def load_annotations(path, fmt):
    """(queries, counts): the usable queries and a Counter of what was dropped or clipped."""
    if fmt not in ("tacos", "seconds"):
        raise TanError(f"annotation format {fmt!r} unknown for {path!r}; expected 'tacos' or 'seconds'")
    if not os.path.isfile(path):
        raise TanError(f"annotation file {path!r} not found")
    try:
        with open(path) as f:
            data = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise TanError(f"annotation file {path!r} is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise TanError(f"annotation file {path!r}: expected an object mapping video ids to annotations")
    queries, counts = [], Counter()
    for video, info in data.items():
        try:
            duration = _video_duration(video, info, fmt)
            stamps, sentences = info["timestamps"], info["sentences"]
        except (KeyError, TypeError, ValueError, ZeroDivisionError):
            counts["video without duration, timestamps or sentences"] += 1
            continue
        if not math.isfinite(duration) or duration <= 0:
            counts["video with a non-positive duration"] += len(sentences) if isinstance(sentences, list) else 1
            continue
        scale = 1.0 / float(info["fps"]) if fmt == "tacos" else 1.0
        for stamp, sentence in zip(stamps, sentences):
            try:
                start, end = float(stamp[0]) * scale, float(stamp[1]) * scale
            except (TypeError, ValueError, IndexError):
                counts["malformed timestamp"] += 1
                continue
            if not (math.isfinite(start) and math.isfinite(end)):
                counts["malformed timestamp"] += 1
                continue
            if start < 0 or end > duration:
                counts["moment clipped to the video"] += 1
                start, end = max(start, 0.0), min(end, duration)
            if start >= end:
                counts["start >= end"] += 1
                continue
            if not isinstance(sentence, str) or not sentence.strip():
                counts["empty sentence"] += 1
                continue
            queries.append(Query(video, duration, start, end, sentence.strip()))
        if len(stamps) != len(sentences):
            counts["timestamps and sentences of different lengths"] += abs(len(stamps) - len(sentences))
    return queries, counts
