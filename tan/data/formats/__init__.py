"""Annotation files -> one record per (video, moment, sentence): :class:`Query`.

A format is a reader registered by name (docs/data.md §1, §9, §11)::

    @register_format("name")
    def read(path, durations, counts):  # -> list of Query
        ...

``durations`` is the catalog entry's ``durations`` file (None when it has none; a reader that
needs none ignores it) and ``counts`` the Counter of what was dropped or clipped, which the
reader adds to under a name that says what was wrong (docs/data.md §2).

Built in, one module each in this package: "tacos" (timestamps in frames with ``fps`` and
``num_frames``), "seconds" (ActivityNet Captions, Charades-STA JSON: timestamps and ``duration``
in seconds), "charades_txt" (Charades-STA's original ``VIDEO START END##sentence`` lines, with
durations from a Charades CSV file) and "jsonl" (Moment-DETR's and lighthouse's JSON lines). A
plug-in (``PLUGINS``) adds formats by registering readers when it is imported.
"""
import importlib
import math
import os
import pkgutil
from collections import Counter

from ...errors import TanError
from .common import (ANNOTATION_FORMATS, FORMATS_WITH_QUERY_IDS, NOT_DROPPED, Dropped, Query, format_evaluators,
                     format_names, register_format)

__all__ = ["ANNOTATION_FORMATS", "FORMATS_WITH_QUERY_IDS", "NOT_DROPPED", "Dropped", "Query", "format_evaluators", "format_names", "load_annotations",
           "register_format"]

# The built-in formats: every module of this package, each registering its reader when imported, so
# that adding one touches only its own module.
for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
del _module


def load_annotations(path, fmt, durations=None):
    """(queries, counts): the usable queries and a Counter of what was dropped or clipped.

    ``durations`` is the file of video durations of formats that need one (the Charades CSV
    file, for "charades_txt").
    """
    if not isinstance(fmt, str) or fmt not in ANNOTATION_FORMATS:
        raise TanError(f"annotation format {fmt!r} unknown for {path!r}; expected one of {', '.join(format_names())}")
    if not os.path.isfile(path):
        raise TanError(f"annotation file {path!r} not found")
    counts = Counter()
    read = ANNOTATION_FORMATS.get(fmt)
    queries = read(path, durations, counts)
    if not isinstance(queries, list) or not all(isinstance(q, Query) for q in queries):
        raise TanError(f"annotation format {fmt!r}: its reader {getattr(read, '__module__', '?')}."
                       f"{getattr(read, '__qualname__', read)} returned {type(queries).__name__}, "
                       f"not a list of Query records (docs/data.md §11)")
    first = {}  # qid -> the number of its first record
    for number, query in enumerate(queries, 1):
        problem = _broken(query)
        if not problem and fmt in FORMATS_WITH_QUERY_IDS and query.qid != "":
            # an id keys the query's sentence features and its line of a submission file: two records of
            # one id would each be given the other's
            earlier = first.setdefault(str(query.qid), number)
            problem = f"its qid {query.qid!r} is that of record {earlier}" if earlier != number else None
        if problem:
            raise TanError(f"annotation format {fmt!r}: its reader {getattr(read, '__module__', '?')}."
                           f"{getattr(read, '__qualname__', read)} returned a record that breaks the Query "
                           f"guarantees of docs/data.md §11.2 (record {number} of {path!r}: {problem}); a reader "
                           f"counts such records and leaves them out")
    return queries, counts


def _broken(query):
    """What is wrong with a record a reader returned (None when it holds the guarantees)."""
    def finite(x):
        return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)

    if not isinstance(query.video, str) or not query.video:
        return f"video {query.video!r} is not a name"
    if not finite(query.duration) or query.duration <= 0:
        return f"duration {query.duration!r} is not a positive number of seconds"
    if not isinstance(query.sentence, str) or not query.sentence.strip():
        return f"sentence {query.sentence!r} is empty or not text"
    for start, end in [(query.start, query.end), *query.moments]:
        if not (finite(start) and finite(end) and 0 <= start < end <= query.duration):
            return f"window ({start!r}, {end!r}) is not 0 <= start < end <= duration ({query.duration})"
    return None
