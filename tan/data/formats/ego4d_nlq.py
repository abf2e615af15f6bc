"""The "ego4d_nlq" format: Ego4D's Natural Language Queries (``nlq_{train,val}.json``,
``nlq_test_unannotated.json``; docs/data.md §1, docs/long_videos.md).

The file holds ``videos``, each with its ``clips`` (``clip_uid``, the clip's place in the video
``video_start_sec`` / ``video_end_sec``), each clip with ``annotations`` (``annotation_uid``),
each with ``language_queries``: the sentence (``query``) and its window in the clip's seconds
(``clip_start_sec`` / ``clip_end_sec``). A query is grounded in its clip: the record's video is
the clip (features are read under its ``clip_uid``, its duration is the clip's), and its id is
``{annotation_uid}_{query_idx}``, the place of the query in its annotation, as the benchmark's
evaluator and server name it. A file whose queries carry no window is the unannotated test split:
its queries are read as unlabeled (Query.labeled False).

The release has queries without a sentence and queries whose window has no length; the official
evaluator scores the latter as misses. A Query needs start < end, so both are left out and
counted ("query without text", EMPTY_WINDOW), as is a window that ends before it starts
(REVERSED_WINDOW); tan-test's NLQ figures count every query with a sentence, those it left out as
misses. An annotation_uid names one annotation in the file: a later annotation with the same
uid is left out and counted, as the "jsonl" reader does with a qid seen before, so that no two
queries share an id (the submission file's annotation_uid and query_idx). What is left out for a
fault of the file is named in a warning (file, annotation_uid, query index).
"""
import math

from ...errors import TanError
from .common import (EMPTY_WINDOW, REVERSED_WINDOW, Dropped, LeftOut, Query, json_number, query_window, read_json,
                     register_format, sentence_text)

FORMAT = "ego4d_nlq"
__all__ = ["EMPTY_WINDOW", "FORMAT", "NOT_ASKED", "REVERSED_WINDOW", "read"]
NO_TEXT = "query without text"
DUPLICATE_ANNOTATION = "annotation_uid seen before in the file"
# The queries of a file that its NLQ figures do not count: one without a sentence asks nothing.
NOT_ASKED = (NO_TEXT,)
# Counted without a warning: the release itself has windows of no length, about one in seven.
COUNTED_ONLY = (EMPTY_WINDOW,)
ADVICE = {DUPLICATE_ANNOTATION: "the first annotation of each annotation_uid is kept; give each annotation its "
                                "own annotation_uid",
          REVERSED_WINDOW: "scored as misses, as the NLQ evaluator scores them; check clip_start_sec and clip_end_sec",
          NO_TEXT: "NLQ-queries does not count them; give each its sentence ('query') to evaluate it"}


def _number(record, key, what):
    value = json_number(record.get(key)) if isinstance(record, dict) else None
    if value is None or not math.isfinite(value):
        raise Dropped(f"{what} without a number {key}")
    return value


def _clip_queries(clip, labeled, left_out, seen):
    """The queries of one clip entry; ``seen``: {annotation_uid: its clip_uid} of the file so far."""
    if not isinstance(clip, dict) or not isinstance(clip.get("clip_uid"), str) or not clip["clip_uid"]:
        raise Dropped("clip without clip_uid")
    clip_uid = clip["clip_uid"]
    # rounded to the microsecond: the difference of two times of the file, not its float residue
    duration = round(_number(clip, "video_end_sec", "clip") - _number(clip, "video_start_sec", "clip"), 6)
    if not 0 < duration < math.inf:
        raise Dropped("clip with a non-positive duration")
    queries = []
    for number, annotation in enumerate(clip.get("annotations") or []):
        uid = annotation.get("annotation_uid") if isinstance(annotation, dict) else None
        listed = annotation.get("language_queries") if isinstance(annotation, dict) else None
        if not isinstance(uid, str) or not uid or not isinstance(listed, list):
            left_out.add("annotation without annotation_uid or language_queries",
                         f"annotation {number} of clip {clip_uid!r}", _listed(listed))
            continue
        if uid in seen:
            left_out.add(DUPLICATE_ANNOTATION, f"{uid!r} in clip {clip_uid!r} (first in clip {seen[uid]!r})",
                         _listed(listed))
            continue
        seen[uid] = clip_uid
        for index, record in enumerate(listed):
            try:
                queries.append(_query(clip_uid, duration, uid, index, record, labeled, left_out.counts))
            except Dropped as dropped:
                reason = str(dropped)
                left_out.add(reason, None if reason in COUNTED_ONLY else f"{uid!r} query {index}")
    return queries


def _asked(record):
    return isinstance(record, dict) and isinstance(record.get("query"), str) and bool(record["query"].strip())


def _listed(language_queries):
    """How many queries a dropped annotation is counted as: those it lists with a sentence (the NLQ
    figures are over these; an entry that asks nothing is named in the warning, not counted)."""
    return sum(map(_asked, language_queries)) if isinstance(language_queries, list) else 0


def _query(clip_uid, duration, annotation_uid, index, record, labeled, counts):
    if not _asked(record):
        raise Dropped(NO_TEXT)
    sentence = sentence_text(record["query"])
    qid = f"{annotation_uid}_{index}"
    if not labeled:
        return Query(clip_uid, duration, 0.0, duration, sentence, qid=qid, labeled=False)
    start, end, clipped = query_window(_number(record, "clip_start_sec", "query"),
                                       _number(record, "clip_end_sec", "query"), duration,
                                       "query window outside its clip")
    if clipped:
        counts["moment clipped to the video"] += 1
    return Query(clip_uid, duration, start, end, sentence, qid=qid)


def _has_windows(data):
    return any("clip_start_sec" in q for v in data["videos"] if isinstance(v, dict)
               for c in v.get("clips") or [] if isinstance(c, dict)
               for a in c.get("annotations") or [] if isinstance(a, dict)
               for q in a.get("language_queries") or [] if isinstance(q, dict))


@register_format(FORMAT, query_ids=True, evaluators=("ego4d_nlq",))
def read(path, durations, counts):
    """The queries of an NLQ file, clip by clip in the file's order; ``durations`` is not used.
    A clip_uid listed again must give its clip the same duration."""
    data = read_json(path)
    if not isinstance(data.get("videos"), list):
        raise TanError(f"annotation file {path!r}: expected Ego4D NLQ's layout, an object with a \"videos\" list")
    labeled = _has_windows(data)
    queries, left_out, seen, lengths = [], LeftOut(counts), {}, {}
    for video in data["videos"]:
        for number, clip in enumerate((video.get("clips") or []) if isinstance(video, dict) else []):
            try:
                found = _clip_queries(clip, labeled, left_out, seen)
            except Dropped as dropped:
                where = video.get("video_uid") if isinstance(video.get("video_uid"), str) else "?"
                uid = clip.get("clip_uid") if isinstance(clip, dict) else None
                left_out.add(str(dropped), repr(uid) if isinstance(uid, str) and uid else
                             f"clip {number} of video {where!r}", _queries_listed(clip))
                continue
            if found:
                _check_duration(path, found[0], lengths)
            queries += found
    left_out.warn(path, ADVICE)
    return queries


def _check_duration(path, query, lengths):
    """A clip's features are read by its clip_uid: two entries of one clip_uid are one clip, of one duration."""
    known = lengths.setdefault(query.video, query.duration)
    if abs(known - query.duration) > 1e-3:
        raise TanError(f"annotation file {path!r}: clip {query.video!r} is listed again with a duration of "
                       f"{query.duration} s, first with {known} s; a clip_uid names one clip (its features are read "
                       f"by it): give each clip its own clip_uid")


def _queries_listed(clip):
    """How many queries a dropped clip is counted as: those it lists with a sentence (:func:`_listed`)."""
    annotations = clip.get("annotations") if isinstance(clip, dict) else None
    return sum(_listed(a.get("language_queries")) for a in annotations or [] if isinstance(a, dict))
