"""The "tacos" format (TACoS): a JSON object keyed by video id, positions in frames with the video's
``fps`` and ``num_frames`` (docs/data.md §1)."""
import math

from .common import Dropped, entry_queries, json_number, read_json, register_format

FIELDS = ("num_frames", "fps", "timestamps", "sentences")


def duration_and_scale(info):
    """(duration in seconds, seconds per frame) of a checked entry."""
    frames, fps = json_number(info["num_frames"]), json_number(info["fps"])
    if frames is None or fps is None:
        raise Dropped("num_frames or fps not a number")
    # Each on its own: two negatives would make a positive duration out of nonsense.
    if not (0 < frames < math.inf and 0 < fps < math.inf):
        raise Dropped("video with a non-positive duration")
    return frames / fps, 1.0 / fps


@register_format("tacos")
def read(path, durations, counts):
    """The queries of a TACoS file; ``durations`` is not used (each entry has its own)."""
    return entry_queries(read_json(path), counts, FIELDS, duration_and_scale)
