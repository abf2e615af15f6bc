"""The "charades_txt" format: Charades-STA's original text form, ``VIDEO START END##sentence`` per line,
with durations from the ``length`` column of a Charades CSV file (docs/data.md §1)."""
import csv
import os

from ...errors import TanError
from . import seconds
from .common import read_text, register_format, text_number


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
        duration = text_number((row["length"] or "").strip())  # None when the row is short
        if duration is not None:
            durations[row["id"]] = duration  # a length that is no number: counted when a line needs that video
    return durations


def _entries(path, durations, counts):
    """The text form as the "seconds" layout: {video: {duration, timestamps, sentences}}."""
    data = {}
    for line in read_text(path, "annotation file").split("\n"):
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
        stamp = [text_number(start), text_number(end)]
        if None in stamp:
            counts["timestamp not two numbers"] += 1
            continue
        entry = data.setdefault(video, {"duration": durations[video], "timestamps": [], "sentences": []})
        entry["timestamps"].append(stamp)
        entry["sentences"].append(sentence)
    return data


@register_format("charades_txt")
def read(path, durations, counts):
    """The queries of a Charades-STA text file; ``durations``: the Charades CSV file (required)."""
    lengths = _read_durations_csv(durations)  # first: a missing CSV stops the run before the text is read
    return seconds.queries_of_entries(_entries(path, lengths, counts), counts)
