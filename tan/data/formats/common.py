"""What the annotation formats share: the record, the registry, reading files and numbers, and the
checks of the per-video JSON layout (docs/data.md §1, §2, §11).

Bad records are dropped or clipped and counted under a name that says what was wrong, never patched
with another record's values and never read as something they are not: a string is not a number,
``true`` is not 1, a string is not a list of sentences. Only a file that cannot be read as a whole
stops the run.
"""
import gzip
import json
import math
import re
from dataclasses import dataclass

from ...errors import TanError
from ...utils.logger import get_logger
from ...utils.registry import Registry


@dataclass
class Query:
    video: str
    duration: float  # seconds
    start: float  # seconds, clipped to [0, duration]: the first window
    end: float
    sentence: str
    qid: str = ""  # the query's id where the format has one (jsonl)
    moments: tuple = ()  # every ground-truth moment, (start, end) each, the first included
    qid_written: object = None  # the qid as the file wrote it (a JSON number stays one in a submission file)
    saliency: tuple = None  # (relevant_clip_ids, saliency_scores [3 per clip]) where the format has them (jsonl)
    # False for a query of a split released without its labels (QVHighlights' test): it has no moment (start
    # 0, end the duration stand in), is never trained on, and is evaluated into a submission file only
    labeled: bool = True

    def __post_init__(self):
        if not self.moments:
            self.moments = ((self.start, self.end),)


# What a query whose window has no length is counted under where a format leaves it out (a Query needs
# start < end); the long-video benchmarks' figures count these as misses.
EMPTY_WINDOW = "query window of no length"
# A window whose end comes before its start: a fault of the file, not a moment of no length; a miss too.
REVERSED_WINDOW = "query window that ends before it starts"
# What the long-video benchmarks' own evaluators score as misses (IoU 0 with any prediction), as tan's
# figures do; the other queries a reader or a dataset leaves out are misses tan could not evaluate.
SCORED_AS_MISSES = (EMPTY_WINDOW, REVERSED_WINDOW)

# Counted, but no query is dropped for them: the query is kept with its moment clipped,
# or with its other windows.
# A query of no length kept with the moment of the query before it, where a benchmark's own loader
# gives it that: the benchmark's figures score it against that moment.
STALE_MOMENT = "moment of no length: the moment of the query before it taken"
NOT_DROPPED = ("moment clipped to the video", "window clipped to the video", "window with start >= end",
               "window not two finite numbers", "saliency labels unusable (left out)", STALE_MOMENT)

# name -> reader: ``read(path, durations, counts) -> list of Query`` (docs/data.md §11).
ANNOTATION_FORMATS = Registry("annotation format")


# The formats whose queries carry an id of the file's own (Query.qid), by which per-query
# sentence features (a catalog entry's "text_features") are found.
FORMATS_WITH_QUERY_IDS = set()


# name -> the evaluators (tan.config.evaluators) a test of the format's datasets runs besides the recall.
FORMAT_EVALUATORS = {}


def register_format(name, query_ids=False, evaluators=()):
    """Decorator: register a reader ``read(path, durations, counts)`` as annotation format ``name``;
    ``query_ids``: its queries carry the file's ids (Query.qid); ``evaluators``: the names of the
    evaluators its datasets are tested with besides the recall (its benchmark's own figures and
    submission file), registered by the time a test runs."""
    if isinstance(evaluators, str) or not all(isinstance(e, str) and e for e in evaluators):
        raise ValueError(f"annotation format {name!r}: evaluators must be a tuple of evaluator names, "
                         f"got {evaluators!r}")

    def deco(read):
        ANNOTATION_FORMATS.register(name)(read)  # refuses a name taken, before anything of it is recorded
        if query_ids:
            FORMATS_WITH_QUERY_IDS.add(name)
        FORMAT_EVALUATORS[name] = tuple(evaluators)
        return read
    return deco


def format_evaluators(name):
    """The evaluators format ``name`` declared (none for a format it does not know)."""
    return FORMAT_EVALUATORS.get(name, ())


def format_names():
    """The annotation formats registered now (the built-in ones and those of imported plug-ins)."""
    return ANNOTATION_FORMATS.names()


# A number as the text form writes one. Stricter than float(), which also takes "nan", "infinity", "1_000"
# and non-ASCII digits, and would so turn a typo in a times column into a value.
_TEXT_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


class Dropped(Exception):
    """A record that cannot be used; the message is the name it is counted under (docs/data.md §2)."""


NAMED_AT_MOST = 5  # queries named in a warning line


class LeftOut:
    """The queries a reader leaves out, counted in the reader's ``counts`` (the dataset's log line
    counts them) and named by the file's own ids, so that a warning line per reason says which
    queries of which file (:meth:`warn`), where a count alone would send the user searching."""

    def __init__(self, counts):
        self.counts = counts
        self.named = {}  # reason -> [queries, names]

    def add(self, reason, name, queries=1):
        """Count ``queries`` under ``reason``, named ``name`` (a query, or the entry that held them; None:
        counted only, for what a file of the benchmark's own release holds as a matter of course)."""
        self.counts[reason] += queries
        if name is None:
            return
        entry = self.named.setdefault(reason, [0, []])
        entry[0] += queries
        entry[1].append(name)

    def warn(self, path, advice=None):
        """One warning per reason, naming ``path`` and the first NAMED_AT_MOST of its queries;
        ``advice``: {reason: what to do}, said after the names."""
        for reason, (queries, names) in self.named.items():
            more = f" and {len(names) - NAMED_AT_MOST} more" if len(names) > NAMED_AT_MOST else ""
            hint = (advice or {}).get(reason)
            get_logger("data").warning("annotation file %r: %d %s left out (%s): %s%s%s", path, queries,
                                       "query" if queries == 1 else "queries", reason,
                                       ", ".join(names[:NAMED_AT_MOST]), more, f"; {hint}" if hint else "")


def json_number(value):
    """A JSON number as a float, else None. bool is refused although Python makes it an int: ``true`` in a
    timestamp is a mistake, not 1. An integer too large for a float becomes inf, which the callers refuse."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:
        return math.inf


def text_number(text):
    """A number written as text, as a float, else None."""
    return float(text) if isinstance(text, str) and _TEXT_NUMBER.fullmatch(text) else None


def read_text(path, what="annotation file"):
    """A UTF-8 text file's content, gzip-compressed or not (``.gz``: the annotation files of
    data/annotations); one that cannot be read stops the run, naming the file."""
    try:
        with (gzip.open(path, "rt", encoding="utf-8") if path.endswith(".gz") else open(path, encoding="utf-8")) as f:
            return f.read()
    except (OSError, EOFError, UnicodeDecodeError) as e:  # EOFError: a truncated .gz
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


def read_json(path):
    """An annotation file's JSON object (video id -> entry); a key given twice in one object is refused."""
    try:
        data = json.loads(read_text(path, "annotation file"), object_pairs_hook=_unique_keys)
    except _DuplicateKey as e:
        raise TanError(f"annotation file {path!r}: {e}") from None
    except (ValueError, RecursionError) as e:  # ValueError: bad JSON, or an integer of more digits than Python reads
        raise TanError(f"annotation file {path!r} is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise TanError(f"annotation file {path!r}: expected an object mapping video ids to annotations")
    return data


def sentence_text(value):
    """A sentence without its surrounding whitespace; raises Dropped when it is no string or blank."""
    if not isinstance(value, str):
        raise Dropped("sentence not a string")
    if not value.strip():
        raise Dropped("empty sentence")
    return value.strip()


def moment(stamp, scale=1.0):
    """(start, end) in seconds of a JSON timestamp in units of ``scale`` seconds, not yet clipped;
    raises Dropped when it is not two finite numbers."""
    if not (isinstance(stamp, list) and len(stamp) == 2):
        raise Dropped("timestamp not two numbers")
    start, end = json_number(stamp[0]), json_number(stamp[1])
    if start is None or end is None:
        raise Dropped("timestamp not two numbers")
    start, end = start * scale, end * scale
    if not (math.isfinite(start) and math.isfinite(end)):
        raise Dropped("timestamp not finite")
    return start, end


def clip_moment(start, end, duration, counts, clipped="moment clipped to the video", empty="start >= end"):
    """(start, end) clipped to [0, duration], or None when nothing is left; each is counted in ``counts``
    under ``clipped`` or ``empty``."""
    if start < 0 or end > duration:
        counts[clipped] += 1
        start, end = max(start, 0.0), min(end, duration)
    if start >= end:
        counts[empty] += 1
        return None
    return start, end


def query_window(start, end, duration, outside):
    """A long-video benchmark's query window (start, end) in its video of ``duration`` s, clipped to it:
    Dropped(EMPTY_WINDOW) for a window of no length, Dropped(REVERSED_WINDOW) for one that ends before
    it starts, Dropped(``outside``) for one wholly outside the video. Returns (start, end, clipped)."""
    if end < start:
        raise Dropped(REVERSED_WINDOW)
    if end == start:
        raise Dropped(EMPTY_WINDOW)
    if end <= 0 or start >= duration:
        raise Dropped(outside)
    return max(start, 0.0), min(end, duration), start < 0 or end > duration


# The per-video JSON layout: {video: {<its duration fields>, "timestamps": [...], "sentences": [...]}}.

def _queries_of(info):
    """How many queries a dropped video entry is counted as: one per sentence it lists, and at least one, so
    that no dropped entry goes uncounted."""
    sentences = info.get("sentences") if isinstance(info, dict) else None
    return max(len(sentences), 1) if isinstance(sentences, list) else 1


def _check_entry(info, required):
    if not isinstance(info, dict):
        raise Dropped("video entry not an object")
    if any(field not in info for field in required):
        raise Dropped("video without duration, timestamps or sentences")
    # Checked before any pairing: zip() would walk a string character by character.
    if not isinstance(info["timestamps"], list):
        raise Dropped("timestamps not a list")
    if not isinstance(info["sentences"], list):
        raise Dropped("sentences not a list")


def video_queries(video, info, counts, required, duration_and_scale):
    """The usable queries of one video entry; what is dropped or clipped is added to ``counts``.

    ``required``: the fields the entry must have (``timestamps`` and ``sentences`` among them);
    ``duration_and_scale(info)``: (duration in seconds, seconds per timestamp unit) of a checked
    entry, raising Dropped when it has none."""
    try:
        _check_entry(info, required)
        duration, scale = duration_and_scale(info)
        if not 0 < duration < math.inf:  # also refuses NaN, for which every comparison is false
            raise Dropped("video with a non-positive duration")
    except Dropped as dropped:
        counts[str(dropped)] += _queries_of(info)
        return []
    stamps, sentences = info["timestamps"], info["sentences"]
    queries = []
    # A pair is checked whole before it is clipped, so that a dropped query is counted once (docs/data.md §2).
    for stamp, sentence in zip(stamps, sentences):
        try:
            start, end = moment(stamp, scale)
            sentence = sentence_text(sentence)
        except Dropped as dropped:
            counts[str(dropped)] += 1
            continue
        kept = clip_moment(start, end, duration, counts)
        if kept is not None:
            queries.append(Query(video, duration, kept[0], kept[1], sentence))
    if len(stamps) != len(sentences):
        counts["timestamps and sentences of different lengths"] += abs(len(stamps) - len(sentences))
    return queries


def entry_queries(data, counts, required, duration_and_scale):
    """The usable queries of every video entry of ``data`` ({video: entry}), in the file's order."""
    queries = []
    for video, info in data.items():
        queries += video_queries(video, info, counts, required, duration_and_scale)
    return queries


def line_queries(path, counts, query_of_line):
    """The usable queries of a file of one record per line (blank lines skipped): ``query_of_line(line,
    counts)`` gives each line's Query, None for one left out that it counted itself, or raises Dropped,
    counted here under its message."""
    queries = []
    for line in read_text(path, "annotation file").split("\n"):
        if not line.strip():
            continue
        try:
            query = query_of_line(line, counts)
        except Dropped as dropped:
            counts[str(dropped)] += 1
            continue
        if query is not None:
            queries.append(query)
    return queries
