"""The annotation format ``near_jsonl``: one query per line,
``{"qid": "...", "video": "...", "duration": 60.0, "moment": [12.5, 20.0], "sentence": "..."}``,
times in seconds. Its datasets are tested with the ``near_moments`` evaluator (evaluator.py)."""
import json
import math

from tan.data.formats import Query, register_format
from tan.data.formats.common import Dropped, clip_moment, json_number, line_queries, moment, sentence_text

FORMAT = "near_jsonl"


def _query(line, counts):
    """The Query of one line, or None when its moment is empty once clipped; raises Dropped."""
    try:
        record = json.loads(line)
    except ValueError:
        raise Dropped("line not JSON") from None
    if not isinstance(record, dict):
        raise Dropped("line not an object")
    qid, video = record.get("qid"), record.get("video")
    if not isinstance(qid, str) or not qid or not isinstance(video, str) or not video:
        raise Dropped("query without qid or video")
    duration = json_number(record.get("duration"))
    if duration is None or not 0 < duration < math.inf:
        raise Dropped("video with a non-positive duration")
    start, end = moment(record.get("moment"), 1.0)
    kept = clip_moment(start, end, duration, counts)
    if kept is None:
        return None
    return Query(video, duration, kept[0], kept[1], sentence_text(record.get("sentence")), qid=qid, qid_written=qid)


@register_format(FORMAT, query_ids=True, evaluators=("near_moments",))
def read(path, durations, counts):
    """The queries of a near_jsonl file; ``durations`` is not used (each line has its own)."""
    return line_queries(path, counts, _query)
