"""The "mad" format: MAD's per-split files (``MAD_{train,val,test}.json``; docs/data.md §1,
docs/long_videos.md, "MAD").

The file is one object keyed by query id; each query names its ``movie`` (the key of the movie's
features), the movie's length (``movie_duration``, seconds), its ``sentence`` and its moment in
the movie's seconds, twice: ``timestamps`` as aligned from the audio description and
``ext_timestamps``, the window the benchmark's baselines train and are scored on. This reader
takes ``ext_timestamps`` where a query has them, as those baselines do, and ``timestamps``
otherwise; the moment is clipped to the movie.

A query whose moment has no length, or ends before it starts, gets the moment of the query before
it in the file (the last one that has a length), as MAD's own loader gives it (VLG-Net's
``_compute_annotaions`` keeps the moment of its loop's previous turn), so that MAD's figures are
MAD's; such queries are counted (STALE_MOMENT) and named in a warning. Where that moment lies
wholly outside the query's movie (it came from a longer movie), or no query before it has one,
the query is left out and counted (EMPTY_WINDOW, REVERSED_WINDOW): tan-test's MAD figures count it
as a miss, as MAD's scores it. What is left out for a fault of the file is named in a warning (the
file and the query ids).
"""
import math

from ...errors import TanError
from ...utils.logger import get_logger
from .common import (EMPTY_WINDOW, NAMED_AT_MOST, REVERSED_WINDOW, STALE_MOMENT, Dropped, LeftOut, Query, json_number,
                     query_window, read_json, register_format, sentence_text)

FORMAT = "mad"
__all__ = ["EMPTY_WINDOW", "FORMAT", "MOMENT_KEYS", "NOT_ASKED", "REVERSED_WINDOW", "STALE_MOMENT", "read"]
# The queries of a file that its MAD figures do not count: without a sentence or a movie, nothing is asked.
NOT_ASKED = ("query not an object", "query without movie", "query without text")
# Counted without a warning: the release itself has a few moments of no length.
COUNTED_ONLY = (EMPTY_WINDOW,)
ADVICE = {REVERSED_WINDOW: "scored as misses; check its timestamps (ext_timestamps first)"}
# The moment the baselines read first; the other is taken where a query lacks it.
MOMENT_KEYS = ("ext_timestamps", "timestamps")


def _moment(record):
    for key in MOMENT_KEYS:
        value = record.get(key)
        if value is None:
            continue
        if not isinstance(value, list) or len(value) != 2:
            raise Dropped(f"{key} not two numbers")
        start, end = (json_number(v) for v in value)
        if start is None or end is None or not (math.isfinite(start) and math.isfinite(end)):
            raise Dropped(f"{key} not two numbers")
        return start, end
    raise Dropped("query without timestamps")


def _query(qid, record, counts, previous):
    """The Query of one record; ``previous``: [the last moment with a length before it, clipped to its
    movie], updated here, as MAD's loader keeps it."""
    if not isinstance(record, dict):
        raise Dropped("query not an object")
    movie = record.get("movie")
    if not isinstance(movie, str) or not movie:
        raise Dropped("query without movie")
    sentence = record.get("sentence")
    if not isinstance(sentence, str) or not sentence.strip():
        raise Dropped("query without text")
    duration = json_number(record.get("movie_duration"))
    if duration is None or not 0 < duration < math.inf:
        raise Dropped("movie_duration not a positive number")
    raw = _moment(record)
    if raw[0] < raw[1]:
        previous[:] = [max(raw[0], 0.0), min(raw[1], duration)]
    elif previous and previous[0] < duration and previous[1] > 0 and previous[0] < previous[1]:
        counts[STALE_MOMENT] += 1  # kept as MAD scores it: against the moment it inherits, unclipped
        return Query(movie, duration, previous[0], previous[1], sentence_text(sentence), qid=str(qid),
                     qid_written=qid)
    start, end, clipped = query_window(*raw, duration, "query window outside its movie")
    if clipped:
        counts["moment clipped to the video"] += 1
    return Query(movie, duration, start, end, sentence_text(sentence), qid=str(qid), qid_written=qid)


@register_format(FORMAT, query_ids=True, evaluators=("mad",))
def read(path, durations, counts):
    """The queries of a MAD file in the file's order; ``durations`` is not used (each query has its
    movie's). One movie's queries must agree on its duration."""
    data = read_json(path)
    if not isinstance(data, dict) or not data or not all(isinstance(v, dict) for v in list(data.values())[:10]):
        raise TanError(f"annotation file {path!r}: expected MAD's layout, an object of query id -> "
                       f"{{movie, sentence, timestamps, ext_timestamps, movie_duration}}")
    queries, lengths, left_out, previous, stale = [], {}, LeftOut(counts), [], []
    for qid, record in data.items():
        try:
            before = counts[STALE_MOMENT]
            query = _query(qid, record, counts, previous)
            if counts[STALE_MOMENT] > before:
                stale.append(repr(qid))
        except Dropped as dropped:
            reason = str(dropped)
            left_out.add(reason, None if reason in COUNTED_ONLY else repr(qid))
            continue
        known = lengths.setdefault(query.video, query.duration)
        if abs(known - query.duration) > 1e-3:
            raise TanError(f"annotation file {path!r}: query {qid!r} gives movie {query.video!r} a duration of "
                           f"{query.duration} s, an earlier query {known} s; a movie has one duration")
        queries.append(query)
    left_out.warn(path, ADVICE)
    if stale:
        get_logger("data").warning("annotation file %r: %d %s of no length given the moment of the query before "
                                   "it, as MAD's loader does (its figures score them so): %s%s", path, len(stale),
                                   "query" if len(stale) == 1 else "queries", ", ".join(stale[:NAMED_AT_MOST]),
                                   f" and {len(stale) - NAMED_AT_MOST} more" if len(stale) > NAMED_AT_MOST else "")
    return queries
