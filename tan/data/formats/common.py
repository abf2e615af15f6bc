"""Annotation files -> one record per (video, moment, sentence).

Formats (docs/data.md §1, §2): "tacos" gives timestamps in frames with ``fps`` and
``num_frames``; "seconds" (ActivityNet Captions, Charades-STA JSON) gives
timestamps and ``duration`` in seconds; "charades_txt" is Charades-STA's
original text form, ``VIDEO START END##sentence`` per line, with durations
from the ``length`` column of a Charades CSV file; "jsonl" is Moment-DETR's
and lighthouse's JSON lines, one query per line (``qid``, ``query``,
``vid``, ``duration``, ``relevant_windows``: one or several windows). Bad records are dropped
or clipped and counted under a name that says what was wrong, never patched
with another record's values and never read as something they are not: a
string is not a number, ``true`` is not 1, a string is not a list of
sentences. Only a file that cannot be read as a whole stops the run.
"""
import csv
import json
import math
import os
import re
from collections import Counter
from dataclasses import dataclass

from ..errors import TanError


@dataclass
class Query:
    video: str
    duration: float  # seconds
    start: float  # seconds, clipped to [0, duration]: the first window
    end: float
    sentence: str
    qid: str = ""  # the query's id where the format has one (jsonl)
    windows: tuple = ()  # every ground-truth window, (start, end) each, the first included

    def __post_init__(self):
        if not self.windows:
            self.windows = ((self.start, self.end),)


FORMATS = ("tacos", "seconds", "charades_txt", "jsonl")
# Counted, but no query is dropped for them: the query is kept with its moment clipped,
# or with its other windows.
NOT_DROPPED = ("moment clipped to the video", "window clipped to the video", "window with start >= end",
               "window not two finite numbers")
JSONL_FIELDS = ("qid", "query", "vid", "duration", "relevant_windows")

# The fields that a video entry must have; charades_txt entries are built in the "seconds" layout.
_REQUIRED_FIELDS = {"tacos": ("num_frames", "fps", "timestamps", "sentences"),
                    "seconds": ("duration", "timestamps", "sentences"),
                    "charades_txt": ("duration", "timestamps", "sentences")}

# A number as the text form writes one. Stricter than float(), which also takes "nan", "infinity", "1_000"
# and non-ASCII digits, and would so turn a typo in a times column into a value.
_TEXT_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


class _Dropped(Exception):
    """A record that cannot be used; the message is the name it is counted under (docs/data.md §2)."""


def _json_number(value):
    """A JSON number as a float, else None. bool is refused although Python makes it an int: ``true`` in a
    timestamp is a mistake, not 1. An integer too large for a float becomes inf, which the callers refuse."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:
        return math.inf


def _text_number(text):
    """A number written as text, as a float, else None."""
    return float(text) if isinstance(text, str) and _TEXT_NUMBER.fullmatch(text) else None


def _read_text(path, what):
    """A UTF-8 text file's content; one that cannot be read stops the run, naming the file."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise TanError(f"{what} {path!r} cannot be read: {e}") from None


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs):
    """A JSON object's dict; a key given twice (a video id, whose first queries would be lost) is refused."""
    data = dict(pairs)
    if len(data) < len(pairs):
        seen = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise _DuplicateKey(f"key {twice!r} is given twice in one object; plain JSON readers keep the last one "
                            f"and drop the first without a word: merge them into one")
    return data


def _read_json(path):
    try:
        data = json.loads(_read_text(path, "annotation file"), object_pairs_hook=_unique_keys)
    except _DuplicateKey as e:
        raise TanError(f"annotation file {path!r}: {e}") from None
    except (ValueError, RecursionError) as e:  # ValueError: bad JSON, or an integer of more digits than Python reads
        raise TanError(f"annotation file {path!r} is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise TanError(f"annotation file {path!r}: expected an object mapping video ids to annotations")
    return data


def _read_durations_csv(path):
    """{video id: seconds} from a Charades CSV (columns ``id`` and ``length``)."""
    if not path or not os.path.isfile(path):
        raise TanError(f"Charades CSV file {path!r} with video durations not found (catalog field 'durations'; "
                       f"the Charades_v1_{{train,test}}.csv files of the Charades release)")
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            columns, rows = reader.fieldnames, list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise TanError(f"Charades CSV file {path!r} cannot be read: {e}") from None
    if not columns or not {"id", "length"} <= set(columns):
        raise TanError(f"{path}: expected the columns 'id' and 'length', got {columns}")
    durations = {}
    for row in rows:
        seconds = _text_number((row["length"] or "").strip())  # None when the row is short
        if seconds is not None:
            durations[row["id"]] = seconds  # a length that is no number: counted when a line needs that video
    return durations


def _read_charades_txt(path, durations_csv, counts):
    """The text form as the JSON layout: {video: {duration, timestamps, sentences}}."""
    durations = _read_durations_csv(durations_csv)
    data = {}
    for line in _read_text(path, "annotation file").split("\n"):
        if not line.strip():
            continue
        head, sep, sentence = line.partition("##")
        fields = head.split()
        if not sep or len(fields) != 3:
            counts["malformed line"] += 1
            continue
        video, start, end = fields
        if video not in durations:
            counts["video without a duration in the CSV"] += 1
            continue
        # Times are text in this form, so reading them as numbers is parsing, not reinterpreting; text that
        # is no number is the fault a string is in a JSON timestamp.
        stamp = [_text_number(start), _text_number(end)]
        if None in stamp:
            counts["timestamp not two numbers"] += 1
            continue
        entry = data.setdefault(video, {"duration": durations[video], "timestamps": [], "sentences": []})
        entry["timestamps"].append(stamp)
        entry["sentences"].append(sentence)
    return data


def _queries_of(info):
    """How many queries a dropped video entry is counted as: one per sentence it lists, and at least one, so
    that no dropped entry goes uncounted."""
    sentences = info.get("sentences") if isinstance(info, dict) else None
    return max(len(sentences), 1) if isinstance(sentences, list) else 1


def _check_entry(info, fmt):
    if not isinstance(info, dict):
        raise _Dropped("video entry not an object")
    if any(field not in info for field in _REQUIRED_FIELDS[fmt]):
        raise _Dropped("video without duration, timestamps or sentences")
    # Checked before any pairing: zip() would walk a string character by character.
    if not isinstance(info["timestamps"], list):
        raise _Dropped("timestamps not a list")
    if not isinstance(info["sentences"], list):
        raise _Dropped("sentences not a list")


def _duration_and_scale(info, fmt):
    """(duration in seconds, seconds per timestamp unit) of a checked entry."""
    if fmt == "tacos":
        frames, fps = _json_number(info["num_frames"]), _json_number(info["fps"])
        if frames is None or fps is None:
            raise _Dropped("num_frames or fps not a number")
        # Each on its own: two negatives would make a positive duration out of nonsense.
        if not (0 < frames < math.inf and 0 < fps < math.inf):
            raise _Dropped("video with a non-positive duration")
        duration, scale = frames / fps, 1.0 / fps
    else:
        duration, scale = _json_number(info["duration"]), 1.0
        if duration is None:
            raise _Dropped("duration not a number")
    if not 0 < duration < math.inf:  # also refuses NaN, for which every comparison is false
        raise _Dropped("video with a non-positive duration")
    return duration, scale


def _moment(stamp, scale):
    """(start, end) in seconds, not yet clipped."""
    if not (isinstance(stamp, list) and len(stamp) == 2):
        raise _Dropped("timestamp not two numbers")
    start, end = _json_number(stamp[0]), _json_number(stamp[1])
    if start is None or end is None:
        raise _Dropped("timestamp not two numbers")
    start, end = start * scale, end * scale
    if not (math.isfinite(start) and math.isfinite(end)):
        raise _Dropped("timestamp not finite")
    return start, end


def _sentence(value):
    if not isinstance(value, str):
        raise _Dropped("sentence not a string")
    if not value.strip():
        raise _Dropped("empty sentence")
    return value.strip()


def _video_queries(video, info, fmt, counts):
    """The usable queries of one video entry; what is dropped or clipped is added to ``counts``."""
    try:
        _check_entry(info, fmt)
        duration, scale = _duration_and_scale(info, fmt)
    except _Dropped as dropped:
        counts[str(dropped)] += _queries_of(info)
        return []
    stamps, sentences = info["timestamps"], info["sentences"]
    queries = []
    # A pair is checked whole before it is clipped, so that a dropped query is counted once (docs/data.md §2).
    for stamp, sentence in zip(stamps, sentences):
        try:
            start, end = _moment(stamp, scale)
            sentence = _sentence(sentence)
        except _Dropped as dropped:
            counts[str(dropped)] += 1
            continue
        if start < 0 or end > duration:
            counts["moment clipped to the video"] += 1
            start, end = max(start, 0.0), min(end, duration)
        if start >= end:
            counts["start >= end"] += 1
            continue
        queries.append(Query(video, duration, start, end, sentence))
    if len(stamps) != len(sentences):
        counts["timestamps and sentences of different lengths"] += abs(len(stamps) - len(sentences))
    return queries


def _clipped_window(stamp, duration, counts):
    """(start, end) of one window clipped to the video, or None (counted) when it cannot be used."""
    try:
        start, end = _moment(stamp, 1.0)
    except _Dropped:
        counts["window not two finite numbers"] += 1
        return None
    if start < 0 or end > duration:
        counts["window clipped to the video"] += 1
        start, end = max(start, 0.0), min(end, duration)
    if start >= end:
        counts["window with start >= end"] += 1
        return None
    return start, end


def _jsonl_query(record, seen, counts):
    """The Query of one JSON-lines record; raises _Dropped with the reason."""
    if not isinstance(record, dict):
        raise _Dropped("line not a JSON object")
    missing = [f for f in JSONL_FIELDS if f not in record]
    if missing:
        raise _Dropped(f"record without {'/'.join(missing)}")
    qid, video = record["qid"], record["vid"]
    if isinstance(qid, bool) or not isinstance(qid, (str, int)):
        raise _Dropped("qid not a string or integer")
    if not isinstance(video, str) or not video:
        raise _Dropped("vid not a string")
    qid = str(qid)
    if qid in seen:
        raise _Dropped("qid seen before in the file")
    duration = _json_number(record["duration"])
    if duration is None:
        raise _Dropped("duration not a number")
    if not 0 < duration < math.inf:
        raise _Dropped("video with a non-positive duration")
    sentence = _sentence(record["query"])
    windows = record["relevant_windows"]
    if not isinstance(windows, list) or not windows:
        raise _Dropped("relevant_windows not a non-empty list")
    # A query is kept when at least one window is usable; the others are counted.
    kept = [w for w in (_clipped_window(stamp, duration, counts) for stamp in windows) if w is not None]
    if not kept:
        raise _Dropped("no usable window")
    seen.add(qid)
    return Query(video, duration, kept[0][0], kept[0][1], sentence, qid=qid, windows=tuple(kept))


def _read_jsonl(path, counts):
    """The queries of a JSON-lines file; a line that is not JSON is counted, not fatal."""
    queries, seen = [], set()
    for line in _read_text(path, "annotation file").split("\n"):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            queries.append(_jsonl_query(record, seen, counts))
        except (ValueError, RecursionError):
            counts["line not valid JSON"] += 1
        except _Dropped as dropped:
            counts[str(dropped)] += 1
    return queries


def load_annotations(path, fmt, durations=None):
    """(queries, counts): the usable queries and a Counter of what was dropped or clipped.

    ``durations`` is the Charades CSV file, for the "charades_txt" format only.
    """
    if fmt not in FORMATS:
        raise TanError(f"annotation format {fmt!r} unknown for {path!r}; expected one of {', '.join(FORMATS)}")
    if not os.path.isfile(path):
        raise TanError(f"annotation file {path!r} not found")
    counts = Counter()
    if fmt == "jsonl":
        return _read_jsonl(path, counts), counts
    data = _read_charades_txt(path, durations, counts) if fmt == "charades_txt" else _read_json(path)
    queries = []
    for video, info in data.items():
        queries += _video_queries(video, info, fmt, counts)
    return queries, counts
