"""The "jsonl" format: Moment-DETR's and lighthouse's JSON lines, one query per line (``qid``, ``query``,
``vid``, ``duration``, ``relevant_windows``: one or several windows; QVHighlights adds ``relevant_clip_ids``
and ``saliency_scores``, three annotators' 0..4 per clip; docs/data.md §9.1)."""
import json
import math

from ...errors import TanError
from .common import (Dropped, LeftOut, Query, clip_moment, json_number, moment, read_text, register_format,
                     sentence_text)

JSONL_FIELDS = ("qid", "query", "vid", "duration", "relevant_windows")
UNLABELED_FIELDS = JSONL_FIELDS[:-1]  # a split released without labels (QVHighlights' test)
DUPLICATE_QID = "qid seen before in the file"


def _clipped_window(stamp, duration, counts):
    """(start, end) of one window clipped to the video, or None (counted) when it cannot be used."""
    try:
        start, end = moment(stamp)
    except Dropped:
        counts["window not two finite numbers"] += 1
        return None
    return clip_moment(start, end, duration, counts, clipped="window clipped to the video",
                       empty="window with start >= end")


def _jsonl_query(record, seen, counts, labeled=True):
    """The Query of one JSON-lines record (``labeled`` False: of a file without any relevant_windows);
    raises Dropped with the reason."""
    if not isinstance(record, dict):
        raise Dropped("line not a JSON object")
    missing = [f for f in (JSONL_FIELDS if labeled else UNLABELED_FIELDS) if f not in record]
    if missing:
        raise Dropped(f"record without {'/'.join(missing)}")
    qid, video = record["qid"], record["vid"]
    if isinstance(qid, bool) or not isinstance(qid, (str, int)):
        raise Dropped("qid not a string or integer")
    if not isinstance(video, str) or not video:
        raise Dropped("vid not a string")
    qid = str(qid)
    if qid in seen:
        raise Dropped(DUPLICATE_QID)
    duration = json_number(record["duration"])
    if duration is None:
        raise Dropped("duration not a number")
    if not 0 < duration < math.inf:
        raise Dropped("video with a non-positive duration")
    sentence = sentence_text(record["query"])
    if not labeled:
        seen.add(qid)
        return Query(video, duration, 0.0, duration, sentence, qid=qid, qid_written=record["qid"], labeled=False)
    windows = record["relevant_windows"]
    if not isinstance(windows, list) or not windows:
        raise Dropped("relevant_windows not a non-empty list")
    # A query is kept when at least one window is usable; the others are counted.
    kept = [w for w in (_clipped_window(stamp, duration, counts) for stamp in windows) if w is not None]
    if not kept:
        raise Dropped("no usable window")
    seen.add(qid)
    return Query(video, duration, kept[0][0], kept[0][1], sentence, qid=qid, moments=tuple(kept),
                 qid_written=record["qid"], saliency=_saliency(record, counts))


def _check_unlabeled(path, records):
    """A file without any relevant_windows is a split whose labels are held back only if its records have
    nothing but the unlabeled fields: another key is more likely a misspelt label than a test split."""
    other = sorted({k for r in records if isinstance(r, dict) for k in r} - set(UNLABELED_FIELDS))
    if other:
        raise TanError(f"annotation file {path!r}: no record has \"relevant_windows\", and the records have "
                       f"{', '.join(repr(k) for k in other)} besides {', '.join(UNLABELED_FIELDS)}; a split without "
                       f"labels (as QVHighlights' test) has only those four fields. Is a field name misspelt?")


def _saliency_score(value):
    """One annotator's score of a clip: an integer from 0 (very bad) to 4 (very good)."""
    number = json_number(value)
    return number is not None and number.is_integer() and 0 <= number <= 4


def _saliency(record, counts):
    """(clip ids, scores) of a record with QVHighlights' saliency labels, else None; unusable labels
    are counted and left out (the query's windows are still used)."""
    if "relevant_clip_ids" not in record and "saliency_scores" not in record:
        return None
    ids, scores = record.get("relevant_clip_ids"), record.get("saliency_scores")
    usable = (isinstance(ids, list) and isinstance(scores, list) and len(ids) == len(scores)
              and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids)
              and all(isinstance(s, list) and len(s) == 3 and all(_saliency_score(x) for x in s) for s in scores))
    if not usable:
        counts["saliency labels unusable (left out)"] += 1
        return None
    return tuple(ids), tuple(tuple(float(x) for x in s) for s in scores)


@register_format("jsonl", query_ids=True, evaluators=("moment_detr",))
def read(path, durations, counts):
    """The queries of a JSON-lines file; a line that is not JSON is counted, not fatal. ``durations``
    is not used (each record has its own). A file where no record has relevant_windows is a split
    released without labels: its queries are read as unlabeled (Query.labeled False)."""
    records = []
    for line in read_text(path, "annotation file").split("\n"):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except (ValueError, RecursionError):
            counts["line not valid JSON"] += 1
    labeled = any(isinstance(r, dict) and "relevant_windows" in r for r in records)
    if not labeled:
        _check_unlabeled(path, records)
    queries, seen, left_out = [], set(), LeftOut(counts)
    for record in records:
        try:
            queries.append(_jsonl_query(record, seen, counts, labeled))
        except Dropped as dropped:
            # a repeated id is named: the two records are one query to every file that keys by qid
            # (sentence features, the submission file)
            reason = str(dropped)
            left_out.add(reason, repr(record["qid"]) if reason == DUPLICATE_QID else None)
    left_out.warn(path, {DUPLICATE_QID: "the first record of each qid is kept; give each query its own qid"})
    return queries
