"""The "seconds" format (ActivityNet Captions, Charades-STA JSON, the synthetic data): a JSON object
keyed by video id, with the ``duration`` and the timestamps in seconds (docs/data.md §1)."""
from .common import Dropped, entry_queries, json_number, read_json, register_format

FIELDS = ("duration", "timestamps", "sentences")


def duration_and_scale(info):
    """(duration in seconds, 1.0) of a checked entry."""
    duration = json_number(info["duration"])
    if duration is None:
        raise Dropped("duration not a number")
    return duration, 1.0


def queries_of_entries(data, counts):
    """The usable queries of entries in this layout ({video: {duration, timestamps, sentences}})."""
    return entry_queries(data, counts, FIELDS, duration_and_scale)


@register_format("seconds")
def read(path, durations, counts):
    """The queries of a file in seconds; ``durations`` is not used (each entry has its own)."""
    return queries_of_entries(read_json(path), counts)
