"""The "jsonl" format: Moment-DETR's and lighthouse's JSON lines, one query per line (``qid``, ``query``,
``vid``, ``duration``, ``relevant_windows``: one or several windows; docs/data.md §9.1)."""
import json
import math

from .common import Dropped, Query, clip_moment, json_number, moment, read_text, register_format, sentence_text

JSONL_FIELDS = ("qid", "query", "vid", "duration", "relevant_windows")


def _clipped_window(stamp, duration, counts):
    """(start, end) of one window clipped to the video, or None (counted) when it cannot be used."""
    try:
        start, end = moment(stamp)
    except Dropped:
        counts["window not two finite numbers"] += 1
        return None
    return clip_moment(start, end, duration, counts, clipped="window clipped to the video",
                       empty="window with start >= end")


def _jsonl_query(record, seen, counts):
    """The Query of one JSON-lines record; raises Dropped with the reason."""
    if not isinstance(record, dict):
        raise Dropped("line not a JSON object")
    missing = [f for f in JSONL_FIELDS if f not in record]
    if missing:
        raise Dropped(f"record without {'/'.join(missing)}")
    qid, video = record["qid"], record["vid"]
    if isinstance(qid, bool) or not isinstance(qid, (str, int)):
        raise Dropped("qid not a string or integer")
    if not isinstance(video, str) or not video:
        raise Dropped("vid not a string")
    qid = str(qid)
    if qid in seen:
        raise Dropped("qid seen before in the file")
    duration = json_number(record["duration"])
    if duration is None:
        raise Dropped("duration not a number")
    if not 0 < duration < math.inf:
        raise Dropped("video with a non-positive duration")
    sentence = sentence_text(record["query"])
    windows = record["relevant_windows"]
    if not isinstance(windows, list) or not windows:
        raise Dropped("relevant_windows not a non-empty list")
    # A query is kept when at least one window is usable; the others are counted.
    kept = [w for w in (_clipped_window(stamp, duration, counts) for stamp in windows) if w is not None]
    if not kept:
        raise Dropped("no usable window")
    seen.add(qid)
    return Query(video, duration, kept[0][0], kept[0][1], sentence, qid=qid, windows=tuple(kept))


@register_format("jsonl")
def read(path, durations, counts):
    """The queries of a JSON-lines file; a line that is not JSON is counted, not fatal. ``durations``
    is not used (each record has its own)."""
    queries, seen = [], set()
    for line in read_text(path, "annotation file").split("\n"):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            queries.append(_jsonl_query(record, seen, counts))
        except (ValueError, RecursionError):
            counts["line not valid JSON"] += 1
        except Dropped as dropped:
            counts[str(dropped)] += 1
    return queries
