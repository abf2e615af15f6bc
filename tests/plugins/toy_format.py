"""A test-only plug-in: the annotation format "toy_tsv" (docs/data.md §11).

One query per line, ``video<TAB>duration<TAB>start<TAB>end<TAB>sentence``, times in seconds.
Loaded with ``PLUGINS: ["tests/plugins/toy_format.py"]``; the catalog entry says ``format: toy_tsv``.
"""
import math

from tan.data.formats import Query, register_format
from tan.data.formats.common import Dropped, clip_moment, line_queries, sentence_text, text_number


def _query(line, counts):
    """The Query of one line, or None when its moment is empty once clipped; raises Dropped."""
    fields = line.split("\t")
    if len(fields) != 5 or not fields[0]:
        raise Dropped("malformed line")
    video, duration, start, end, sentence = fields
    duration = text_number(duration.strip())
    if duration is None:
        raise Dropped("duration not a number")
    if not 0 < duration < math.inf:
        raise Dropped("video with a non-positive duration")
    start, end = text_number(start.strip()), text_number(end.strip())
    if start is None or end is None:
        raise Dropped("timestamp not two numbers")
    if not (math.isfinite(start) and math.isfinite(end)):  # "1e999" is a number, and infinite
        raise Dropped("timestamp not finite")
    sentence = sentence_text(sentence)
    moment = clip_moment(start, end, duration, counts)
    return None if moment is None else Query(video, duration, moment[0], moment[1], sentence)


@register_format("toy_tsv")
def read(path, durations, counts):
    """The queries of a toy_tsv file; ``durations`` is not used (each line has its own)."""
    return line_queries(path, counts, _query)
