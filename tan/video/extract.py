"""Feature extraction over many videos: decoding in parallel workers, the
backbone in batches on the configured device, one file per video.

Each video's rows are written as ``{video}.npz`` (array ``features`` [T, D]
float32, ``duration``, the video's length in seconds, and the video file's
size and modification time) atomically, once the whole video is through, so
a stopped or killed run leaves finished files and nothing partial; run
again, it skips the videos that have a file, unless their video file has
changed since (a partial download replaced by the whole file). The
folder's ``extractor.json`` (tan/data/features/provenance.py) is written
before the first file, and a folder made by another extractor is refused.
A video that cannot be read is reported with its reason at the end; the
others go on.
"""
import io
import os
import zipfile
from collections import Counter, OrderedDict
from dataclasses import dataclass, field

import numpy as np
import torch

from ..data.dataset import named
from ..data.features.array_files import write_npz
from ..data.features.provenance import (EXTRACTOR_FILE, RECORD_VERSION, describe_extractor, differences, read_extractor,
                                        same_extractor, write_extractor)
from ..errors import TanError
from ..utils.io import atomic_write_bytes
from ..utils.logger import get_logger
from ..utils.progress import progress
from ..version import __version__
from .decode import Sampling, VideoError, check_sampling, clip_chunks, decoder_version

VIDEO_EXTENSIONS = (".mp4", ".avi", ".mkv", ".webm", ".mov", ".m4v", ".mpg", ".mpeg", ".flv", ".wmv", ".3gp", ".ts")
FEATURE_KEY = "features"
# The video file a .npz's rows were made from, as it was when its decoding began: size in bytes and
# modification time in nanoseconds (int64 scalars). Readers of the rows read FEATURE_KEY and ignore them.
SOURCE_KEYS = ("source_size", "source_mtime_ns")


def list_videos(paths):
    """[(video id, path)] of ``paths``: video files, and the files with a video extension in folders
    (sorted). A video's id is its file name without the extension; two files with one id are an error."""
    found = []
    for path in paths:
        if os.path.isdir(path):
            names = sorted(n for n in os.listdir(path) if n.lower().endswith(VIDEO_EXTENSIONS) and not n.startswith("."))
            found.extend(os.path.join(path, n) for n in names)
        elif os.path.exists(path):
            found.append(path)
        else:
            raise TanError(f"video file or folder {path!r} not found")
    videos = OrderedDict()
    for path in found:
        video = os.path.splitext(os.path.basename(path))[0]
        if video in videos:
            raise TanError(f"two videos have the id {video!r} ({videos[video]!r} and {path!r}); a video's features "
                           f"are named by its file name without the extension")
        videos[video] = path
    if not videos:
        raise TanError(f"no video file in {', '.join(map(repr, paths))} (extensions: {' '.join(VIDEO_EXTENSIONS)})")
    return list(videos.items())


def video_record(backbone, sampling):
    """The extractor record of ``backbone``'s video features sampled as ``sampling``."""
    return {"version": RECORD_VERSION, "kind": "video", **backbone.record(), "frame_rate": sampling.frame_rate,
            "clip_seconds": sampling.clip_seconds, "frames_per_clip": sampling.frames_per_clip,
            "decoder": decoder_version(), "tan_version": __version__}


def backbone_sampling(backbone, clip_seconds, frame_rate=None):
    """The :class:`Sampling` of ``backbone`` for clips of ``clip_seconds``: ``frame_rate`` (default: the
    backbone's frames per clip over the clip length), at the backbone's resolution."""
    rate = backbone.default_frame_rate(clip_seconds) if frame_rate is None else frame_rate
    try:
        sampling = check_sampling(rate, clip_seconds, backbone.resolution)
    except ValueError as e:
        raise TanError(f"--frame-rate / --clip-seconds: {e}") from None
    wanted = backbone.frames_per_clip
    if wanted is not None and sampling.frames_per_clip != wanted:
        raise TanError(f"{backbone.NAME} {backbone.model_name!r} takes {wanted} frames per clip; frame rate "
                       f"{rate:g} x clip length {clip_seconds:g} s gives {sampling.frames_per_clip} (leave "
                       f"--frame-rate out for {wanted / clip_seconds:g})")
    return sampling


def npz_bytes(arrays):
    """An uncompressed .npz of ``arrays`` ({name: array}), as bytes (written atomically by the caller)."""
    buffer = io.BytesIO()
    write_npz(buffer, arrays)
    return buffer.getvalue()


def source_stamp(path):
    """{SOURCE_KEYS: values} of the video file at ``path``, taken before it is decoded and written
    beside its rows, so that a rerun can tell the file has changed since; empty when it cannot be
    looked at (decoding then says why)."""
    try:
        info = os.stat(path)
    except OSError:
        return {}
    return dict(zip(SOURCE_KEYS, (np.int64(info.st_size), np.int64(info.st_mtime_ns))))


def changed_since_written(feature_file, path):
    """Whether the video file at ``path`` differs in size or modification time from the one the rows of
    ``feature_file`` were made from, or ``feature_file`` cannot be read (damaged outside tan: made again).
    A file that does not record its source (written by an older version) counts as unchanged: its rows
    are kept as they are."""
    try:
        with np.load(feature_file, allow_pickle=False) as stored:
            if not all(key in stored.files for key in SOURCE_KEYS):
                return False
            recorded = [int(stored[key]) for key in SOURCE_KEYS]
    except (OSError, ValueError, EOFError, zipfile.BadZipFile):
        return True
    now = source_stamp(path)
    return bool(now) and [int(now[key]) for key in SOURCE_KEYS] != recorded


def videos_to_do(videos, feature_files, summary, overwrite=False):
    """The videos of ``videos`` ([(id, path)]) to extract (:func:`to_do`): those missing one of their
    files (``feature_files(video)``: its .npz paths) and those whose video file changed since."""
    return to_do(videos, feature_files, changed_since_written, summary, overwrite,
                 "video files changed since their features were written (or their features cannot be read); "
                 "extracting them again")


def to_do(items, output_files, outdated, summary, overwrite, outdated_said):
    """The items of ``items`` ([(id, source)]) to make: all of them with ``overwrite``, else those missing
    one of their files (``output_files(id)``) and those whose source one of them no longer matches
    (``outdated(file, source)``; logged by name after ``outdated_said``); the others go to
    ``summary.skipped``."""
    todo, outdated_ones = [], []
    for item, source in items:
        files = output_files(item)
        if overwrite or not all(os.path.exists(f) for f in files):
            todo.append((item, source))
        elif any(outdated(f, source) for f in files):
            todo.append((item, source))
            outdated_ones.append(item)
        else:
            summary.skipped.append(item)
    if outdated_ones:
        get_logger("extract").warning("%d %s: %s", len(outdated_ones), outdated_said, named(outdated_ones))
    return todo


def claim_folder(folder, record, what="features", overwrite=False):
    """Make ``folder`` the home of ``record``'s features: write its record, or check the one there.
    A folder of .npz files with no record is refused unless they are all to be made again
    (``overwrite``): its files would be taken as this extractor's."""
    existing = check_folder(folder, record, what, overwrite)
    os.makedirs(folder, exist_ok=True)
    if existing is None or existing != record:
        write_extractor(folder, record)


def check_folder(folder, record, what="features", overwrite=False):
    """The refusals of :func:`claim_folder`, writing nothing; the record there (None: none)."""
    existing = read_extractor(folder)
    if existing is None and not overwrite and os.path.isdir(folder) and \
            any(n.endswith(".npz") for n in os.listdir(folder)):
        raise TanError(f"{folder!r} holds .npz files but no extractor record ({EXTRACTOR_FILE}): they were made "
                       f"otherwise, and would be skipped as if this extractor had made them. Write to another "
                       f"folder, or pass --overwrite to make every file again")
    if existing is not None and not same_extractor(existing, record):
        raise TanError(f"{folder!r} holds {what} made by another extractor ({describe_extractor(existing)}); "
                       f"this one differs in {'; '.join(differences(existing, record))}. Mixing them would give "
                       f"the model rows of two kinds: write to another folder")
    return existing


class _VideoJobs(torch.utils.data.IterableDataset):
    """The videos to decode, shared out between the loader's workers; yields ("chunk", video, first
    clip, frames, end, the file's :func:`source_stamp`) and ("failed", video, reason, detail) messages."""

    def __init__(self, videos, sampling, clips_per_chunk):
        self.videos, self.sampling, self.clips_per_chunk = videos, sampling, clips_per_chunk

    def __iter__(self):
        worker = torch.utils.data.get_worker_info()
        mine = self.videos if worker is None else self.videos[worker.id::worker.num_workers]
        for video, path in mine:
            stamp = source_stamp(path)
            try:
                for chunk in clip_chunks(path, self.sampling, self.clips_per_chunk):
                    yield "chunk", video, chunk.first, torch.from_numpy(chunk.frames), chunk.end, stamp
            except VideoError as e:
                yield "failed", video, e.reason, e.detail
            except Exception as e:  # noqa: BLE001  (one video's failure must not stop the others)
                yield "failed", video, "decoding error", f"{type(e).__name__}: {e}"


@dataclass
class ExtractionSummary:
    """What a run over a folder did: ``written`` and ``skipped`` video ids, ``failed`` {video: (reason, detail)},
    ``files`` {video: its file} of the failed ones, which the summary names."""
    output: str
    unit: str = "videos"
    written: list = field(default_factory=list)
    skipped: list = field(default_factory=list)
    failed: dict = field(default_factory=dict)
    files: dict = field(default_factory=dict)
    clips: int = 0

    def fail(self, video, path, reason, detail=""):
        """Record, and log, that ``video`` (the file ``path``) could not be read, for ``reason``."""
        self.failed[video] = (reason, detail)
        self.files[video] = path
        get_logger("extract").warning("%s: %s%s", path, reason, f" ({detail})" if detail else "")

    def text(self):
        rows = "clips" if self.unit == "videos" else "tokens"
        lines = [f"{len(self.written)} {self.unit} written ({self.clips} {rows}), {len(self.skipped)} already there, "
                 f"{len(self.failed)} failed, in {self.output}"]
        by_reason = Counter(reason for reason, _ in self.failed.values())
        for reason, count in by_reason.most_common():
            lines.append(f"  {reason}: {count}")
            for video, (why, detail) in sorted(self.failed.items()):
                if why == reason:
                    lines.append(f"    {self.files.get(video, video)}" + (f" ({detail})" if detail else ""))
        return "\n".join(lines)


def extract_videos(videos, backbone, sampling, output, clips_per_chunk=16, workers=0, overwrite=False):
    """Features of ``videos`` ([(id, path)], :func:`list_videos`) by ``backbone`` into the folder ``output``;
    returns an :class:`ExtractionSummary`."""
    if not isinstance(sampling, Sampling):
        raise TypeError("sampling must be a decode.Sampling")
    record = video_record(backbone, sampling)
    claim_folder(output, record, overwrite=overwrite)
    summary = ExtractionSummary(output)
    todo = videos_to_do(videos, lambda video: [_feature_path(output, video)], summary, overwrite)
    paths = dict(todo)
    logger = get_logger("extract")
    logger.info("%s: %d videos to extract, %d already in %s", describe_extractor(record), len(todo),
                len(summary.skipped), output)
    loader = torch.utils.data.DataLoader(_VideoJobs(todo, sampling, clips_per_chunk), batch_size=None,
                                         num_workers=min(workers, len(todo)), collate_fn=_as_is)
    partial = {}
    bar = progress(range(len(todo)), total=len(todo), desc="videos", unit="video")
    done = iter(bar)
    for message in loader:
        video = message[1]
        if message[0] == "failed":
            partial.pop(video, None)
            summary.fail(video, paths[video], message[2], message[3])
            next(done, None)
            continue
        _, _, first, frames, end, stamp = message
        partial.setdefault(video, []).append(backbone.encode(frames) if len(frames) else None)
        if end is not None:
            rows = np.concatenate([r for r in partial.pop(video) if r is not None]).astype(np.float32)
            atomic_write_bytes(_feature_path(output, video),
                               npz_bytes({FEATURE_KEY: rows, "duration": end, **stamp}))
            summary.written.append(video)
            summary.clips += len(rows)
            next(done, None)
    next(done, None)
    return summary


def _as_is(message):
    return message


def _feature_path(folder, video):
    return os.path.join(folder, f"{video}.npz")
