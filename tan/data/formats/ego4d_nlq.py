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
counted ("query without text", EMPTY_WINDOW); tan-test's NLQ figures count the latter as misses.
"""
import math

from ...errors import TanError
from .common import (EMPTY_WINDOW, Dropped, Query, json_number, query_window, read_json, register_format,
                     sentence_text)

FORMAT = "ego4d_nlq"
__all__ = ["EMPTY_WINDOW", "FORMAT", "read"]


def _number(record, key, what):
    value = json_number(record.get(key)) if isinstance(record, dict) else None
    if value is None or not math.isfinite(value):
        raise Dropped(f"{what} without a number {key}")
    return value


def _clip_queries(clip, labeled, counts):
    """The queries of one clip entry."""
    if not isinstance(clip, dict) or not isinstance(clip.get("clip_uid"), str) or not clip["clip_uid"]:
        raise Dropped("clip without clip_uid")
    # rounded to the microsecond: the difference of two times of the file, not its float residue
    duration = round(_number(clip, "video_end_sec", "clip") - _number(clip, "video_start_sec", "clip"), 6)
    if not 0 < duration < math.inf:
        raise Dropped("clip with a non-positive duration")
    queries = []
    for annotation in clip.get("annotations") or []:
        uid = annotation.get("annotation_uid") if isinstance(annotation, dict) else None
        if not isinstance(uid, str) or not uid or not isinstance(annotation.get("language_queries"), list):
            counts["annotation without annotation_uid or language_queries"] += 1
            continue
        for index, record in enumerate(annotation["language_queries"]):
            try:
                queries.append(_query(clip["clip_uid"], duration, uid, index, record, labeled, counts))
            except Dropped as dropped:
                counts[str(dropped)] += 1
    return queries


def _query(clip_uid, duration, annotation_uid, index, record, labeled, counts):
    if not isinstance(record, dict) or not isinstance(record.get("query"), str) or not record["query"].strip():
        raise Dropped("query without text")
    sentence = sentence_text(record["query"])
    qid = f"{annotation_uid}_{index}"
    if not labeled:
        return Query(clip_uid, duration, 0.0, duration, sentence, qid=qid, labeled=False)
    start, end, clipped = query_window(_number(record, "clip_start_sec", "query"),
                                       _number(record, "clip_end_sec", "query"), duration, "query window outside its clip")
    if clipped:
        counts["moment clipped to the video"] += 1
    return Query(clip_uid, duration, start, end, sentence, qid=qid)


def _has_windows(data):
    return any("clip_start_sec" in q for v in data["videos"] if isinstance(v, dict)
               for c in v.get("clips") or [] if isinstance(c, dict)
               for a in c.get("annotations") or [] if isinstance(a, dict)
               for q in a.get("language_queries") or [] if isinstance(q, dict))


@register_format(FORMAT, query_ids=True)
def read(path, durations, counts):
    """The queries of an NLQ file, clip by clip in the file's order; ``durations`` is not used."""
    data = read_json(path)
    if not isinstance(data.get("videos"), list):
        raise TanError(f"annotation file {path!r}: expected Ego4D NLQ's layout, an object with a \"videos\" list")
    labeled = _has_windows(data)
    queries = []
    for video in data["videos"]:
        for clip in (video.get("clips") or []) if isinstance(video, dict) else []:
            try:
                queries += _clip_queries(clip, labeled, counts)
            except Dropped as dropped:
                counts[str(dropped)] += _queries_listed(clip)
    return queries


def _queries_listed(clip):
    """How many queries a dropped clip is counted as: those it lists, at least one."""
    annotations = clip.get("annotations") if isinstance(clip, dict) else None
    listed = sum(len(a["language_queries"]) for a in annotations or []
                 if isinstance(a, dict) and isinstance(a.get("language_queries"), list))
    return max(listed, 1)
