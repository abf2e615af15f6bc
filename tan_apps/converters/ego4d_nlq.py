"""Ego4D NLQ's clip features from its per-video features (docs/long_videos.md, "Ego4D NLQ").

Ego4D releases its SlowFast features per video (``{video_uid}.pt``, 30/16 rows a second: one
per 16 frames at 30 fps); an NLQ query is grounded in a clip of a video. This cuts, for every
clip of the annotation files, the rows ``int(video_start_sec * rate)`` to
``int(video_end_sec * rate)`` of its video (as the benchmark's 2D-TAN baseline cuts them) into
one HDF5 file with a dataset per ``clip_uid``: the features the "ego4d_nlq" format reads. The
file appears complete or not at all.

    from tan_apps.converters.ego4d_nlq import cut_nlq_clips
    cut_nlq_clips(["nlq_train.json", "nlq_val.json"], "slowfast/", "nlq_clips.hdf5")
"""
import json
import os

import h5py
import numpy as np
import torch

from tan.data.features.sources import open_source
from tan.errors import TanError
from tan.utils.io import replaced_when_done
from tan.utils.progress import progress

SLOWFAST_RATE = 30.0 / 16  # rows a second of Ego4D's SlowFast features
ROWS_SHORT = 2  # a video's features may end a row or two before its last clip does


def nlq_clips(annotation_files):
    """{clip_uid: (video_uid, video_start_sec, video_end_sec)} of every clip of the NLQ files."""
    clips = {}
    for path in annotation_files:
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            for video in data["videos"]:
                for clip in video["clips"]:
                    place = (video["video_uid"], float(clip["video_start_sec"]), float(clip["video_end_sec"]))
                    if clips.setdefault(clip["clip_uid"], place) != place:
                        raise TanError(f"{path}: clip {clip['clip_uid']!r} is placed at {place} here and at "
                                       f"{clips[clip['clip_uid']]} before")
        except (OSError, ValueError) as e:
            raise TanError(f"NLQ annotation file {path!r} cannot be read: {e}") from None
        except (KeyError, TypeError) as e:
            raise TanError(f"NLQ annotation file {path!r}: expected videos[].clips[] with video_uid, clip_uid, "
                           f"video_start_sec and video_end_sec ({type(e).__name__}: {e})") from None
    return clips


class _VideoFeatures:
    """A video's rows by its uid: from a folder of ``{uid}.pt`` (Ego4D's release), or any source
    tan reads (an HDF5 file, a folder of .npy / .npz)."""

    def __init__(self, path):
        self.path = path
        self.torch_files = os.path.isdir(path) and any(n.endswith(".pt") for n in os.listdir(path))
        self.source = None if self.torch_files else open_source(path, None)

    def read(self, video):
        if not self.torch_files:
            return self.source.read(video)
        file = os.path.join(self.path, f"{video}.pt")
        if not os.path.isfile(file):
            raise TanError(f"video {video!r}: no {file}")
        rows = torch.load(file, map_location="cpu", weights_only=True)
        return np.asarray(rows.float() if torch.is_tensor(rows) else rows, dtype=np.float32)


def cut_nlq_clips(annotation_files, video_features, output, rate=SLOWFAST_RATE):
    """Write ``output`` (HDF5, a dataset per clip_uid) from ``video_features`` for every clip of
    ``annotation_files``. Returns {"clips": n, "videos": m, "rows": total rows written}."""
    clips = nlq_clips(annotation_files)
    if not clips:
        raise TanError(f"no clip in {', '.join(annotation_files)}")
    source = _VideoFeatures(video_features)
    by_video = {}
    for clip, (video, start, end) in clips.items():
        by_video.setdefault(video, []).append((clip, start, end))
    rows = 0
    with replaced_when_done(output) as tmp, h5py.File(tmp, "w") as h5:
        for video in progress(sorted(by_video), total=len(by_video), desc="videos", unit="video"):
            feats = source.read(video)
            for clip, start, end in sorted(by_video[video]):
                first, last = int(start * rate), int(end * rate)
                cut = feats[first:last]
                if len(cut) < max(1, last - first - ROWS_SHORT):
                    raise TanError(f"clip {clip!r}: video {video!r} has {len(feats)} rows; the clip needs rows "
                                   f"[{first}, {last}) ({start}-{end} s at {rate:.4g} rows a second): are these "
                                   f"its features, at that rate?")
                h5.create_dataset(clip, data=np.asarray(cut, dtype=np.float32))
                rows += len(cut)
    return {"clips": len(clips), "videos": len(by_video), "rows": rows}
