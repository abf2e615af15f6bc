"""Annotation files -> one record per (video, moment, sentence).

Formats (docs/data.md §1, §2): "tacos" gives timestamps in frames with ``fps`` and
``num_frames``; "seconds" (ActivityNet Captions, Charades-STA JSON) gives
timestamps and ``duration`` in seconds; "charades_txt" is Charades-STA's
original text form, ``VIDEO START END##sentence`` per line, with durations
from the ``length`` column of a Charades CSV file. Bad records are dropped
or clipped and counted, never patched with another record's values.
"""
import csv
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


FORMATS = ("tacos", "seconds", "charades_txt")


def _read_json(path):
    try:
        with open(path) as f:
            data = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise TanError(f"annotation file {path!r} is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise TanError(f"annotation file {path!r}: expected an object mapping video ids to annotations")
    return data


def _read_durations_csv(path):
    """{video id: seconds} from a Charades CSV (columns ``id`` and ``length``)."""
    if not path or not os.path.isfile(path):
        raise TanError(f"Charades CSV file {path!r} with video durations not found (catalog field 'durations'; "
                       f"the Charades_v1_{{train,test}}.csv files of the Charades release)")
    durations = {}
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if not reader.fieldnames or not {"id", "length"} <= set(reader.fieldnames):
            raise TanError(f"{path}: expected the columns 'id' and 'length', got {reader.fieldnames}")
        for row in reader:
            try:
                durations[row["id"]] = float(row["length"])
            except (TypeError, ValueError):
                continue  # counted when a query needs that video
    return durations


def _read_charades_txt(path, durations_csv, counts):
    """The text form as the JSON layout: {video: {duration, timestamps, sentences}}."""
    durations = _read_durations_csv(durations_csv)
    data = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            head, sep, sentence = line.rstrip("\n").partition("##")
            fields = head.split()
            if not sep or len(fields) != 3:
                counts["malformed line"] += 1
                continue
            video, start, end = fields
            if video not in durations:
                counts["video without a duration in the CSV"] += 1
                continue
            entry = data.setdefault(video, {"duration": durations[video], "timestamps": [], "sentences": []})
            entry["timestamps"].append([start, end])
            entry["sentences"].append(sentence)
    return data


def load_annotations(path, fmt, durations=None):
    """(queries, counts): the usable queries and a Counter of what was dropped or clipped.

    ``durations`` is the Charades CSV file, for the "charades_txt" format only.
    """
    if fmt not in FORMATS:
        raise TanError(f"annotation format {fmt!r} unknown for {path!r}; expected one of {', '.join(FORMATS)}")
    if not os.path.isfile(path):
        raise TanError(f"annotation file {path!r} not found")
    counts = Counter()
    data = _read_charades_txt(path, durations, counts) if fmt == "charades_txt" else _read_json(path)
    queries = []
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
