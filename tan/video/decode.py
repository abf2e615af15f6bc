"""From a video file to the frames a backbone sees, a clip at a time.

Decoding is PyAV's (FFmpeg). Its wheels carry their own FFmpeg, so nothing
has to match the system's libraries or the torch build (torchcodec needs
both), it decodes one packet at a time (an hours-long video streams through
in bounded memory), and FFmpeg's scaler resizes each frame in C before it
becomes a NumPy array.

Sampling is by time, not by frame index, so a variable-frame-rate video is
sampled evenly: sample k sits at (k + 0.5) / frame_rate seconds and takes the
frame on screen then (the last one that started at or before it). A clip is
``frames_per_clip`` consecutive samples; a video of E seconds (the end of its
last frame) gives ceil(E / clip_seconds) clips, at least one, and the last
clip is completed with copies of the last frame.
"""
import math
import os
from dataclasses import dataclass

import numpy as np

from ..errors import TanError

# Why a video could not be read, as the extraction summary groups them.
EMPTY = "empty file"
CORRUPT = "corrupt file"
NO_VIDEO = "no video stream"
NO_FRAMES = "zero frames"
CODEC = "unreadable codec"
TRUNCATED = "truncated file"
MISSING = "file not found"
UNREADABLE = "unreadable file"


class VideoError(Exception):
    """A video file that gives no frames; ``reason`` is one of this module's reasons."""

    def __init__(self, reason, detail=""):
        self.reason, self.detail = reason, detail
        super().__init__(f"{reason}: {detail}" if detail else reason)


@dataclass(frozen=True)
class Sampling:
    """Which frames a clip holds and at what size: ``frame_rate`` samples per second,
    ``clip_seconds`` per clip, frames scaled so the shorter side is ``resolution`` and
    cut to the centre square."""
    frame_rate: float
    clip_seconds: float
    resolution: int

    def __post_init__(self):
        validate_sampling(self.frame_rate, self.clip_seconds, self.resolution)

    @property
    def frames_per_clip(self):
        return int(round(self.frame_rate * self.clip_seconds))


def validate_sampling(frame_rate, clip_seconds, resolution):
    """A ValueError naming the value and what was expected, unless the sampling gives whole clips."""
    for name, value in (("frame rate", frame_rate), ("clip length", clip_seconds)):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(f"{name} {value!r}: expected a positive number")
    per_clip = frame_rate * clip_seconds
    if abs(per_clip - round(per_clip)) > 1e-6 or round(per_clip) < 1:
        raise ValueError(f"frame rate {frame_rate:g} x clip length {clip_seconds:g} s = {per_clip:g} frames per "
                         f"clip: expected a whole number of at least 1")
    if not (isinstance(resolution, int) and resolution > 0):
        raise ValueError(f"resolution {resolution!r}: expected a positive number of pixels")


def check_sampling(frame_rate, clip_seconds, resolution):
    """A :class:`Sampling`, or a ValueError naming the value and what was expected."""
    return Sampling(float(frame_rate), float(clip_seconds), resolution)


def _av():
    try:
        import av
    except ImportError:
        raise TanError("decoding videos needs PyAV, which is not installed: pip install 'tan[video]' "
                       "(or pip install av)") from None
    return av


def decoder_version():
    return f"PyAV {_av().__version__}"


def open_video(path):
    """(container, its first video stream); a :class:`VideoError` when there is none to decode."""
    av = _av()
    try:
        if os.path.getsize(path) == 0:
            raise VideoError(EMPTY, "0 bytes")
        container = av.open(path, metadata_errors="ignore")
    except FileNotFoundError:
        raise VideoError(MISSING) from None
    except (PermissionError, IsADirectoryError) as e:
        raise VideoError(UNREADABLE, e.strerror or str(e)) from None
    except av.error.FFmpegError as e:
        raise VideoError(CORRUPT, f"FFmpeg cannot open it ({_ffmpeg_message(e)})") from None
    if not container.streams.video:
        kinds = sorted({s.type for s in container.streams}) or ["none"]
        container.close()
        raise VideoError(NO_VIDEO, f"streams: {', '.join(kinds)}")
    stream = container.streams.video[0]
    context = stream.codec_context
    if context is None or context.codec is None or not context.codec.is_decoder:
        container.close()
        raise VideoError(CODEC, f"FFmpeg has no decoder for its codec {_codec_name(stream)!r}")
    stream.thread_type = "AUTO"
    return container, stream


def _codec_name(stream):
    try:
        return stream.codec_context.codec.name
    except AttributeError:
        return getattr(stream, "codec_tag", "") or "unknown"


def _ffmpeg_message(error):
    return getattr(error, "strerror", None) or str(error)


def decoded_frames(container, stream):
    """The stream's frames in presentation order; a truncated or damaged tail ends the stream."""
    av = _av()
    try:
        for packet in container.demux(stream):
            try:
                frames = packet.decode()
            except av.error.InvalidDataError:
                continue  # one damaged packet; FFmpeg's decoders resynchronise on the next
            yield from frames
    except av.error.FFmpegError:
        return  # the rest of the file cannot be demuxed: what came before is the video


class FrameScaler:
    """Frames -> [S, S, 3] uint8 RGB: scaled by FFmpeg so the shorter side is S, then the centre square.

    Each scaler has its own FFmpeg scaler: ``frame.reformat`` shares one per thread, whose slice
    threads a forked decoding worker inherits as a copy without threads, so the worker's first
    frame would wait for them forever once this process had scaled a frame (PyAV 18)."""

    def __init__(self, resolution):
        self.resolution = resolution
        self._size = None
        self._reformatter = _av().video.reformatter.VideoReformatter()

    def __call__(self, frame):
        if self._size is None or self._size[0] != (frame.width, frame.height):
            scale = self.resolution / min(frame.width, frame.height)
            size = (max(self.resolution, round(frame.width * scale)), max(self.resolution, round(frame.height * scale)))
            self._size = ((frame.width, frame.height), size)
        width, height = self._size[1]
        rgb = self._reformatter.reformat(frame, width=width, height=height, format="rgb24",
                                         interpolation="BICUBIC").to_ndarray()
        top, left = (height - self.resolution) // 2, (width - self.resolution) // 2
        return rgb[top:top + self.resolution, left:left + self.resolution]


def _frame_time(frame, index, rate):
    return float(frame.time) if frame.time is not None else index / rate


def sampled_frames(container, stream, sampling):
    """(sample index, [S, S, 3] frame) for every sample of the video, then (its end in seconds, the
    last frame, the number of samples) as the generator's return value; a :class:`VideoError` when
    it has no frame, or ends well before the length its header gives. Times count from the first
    frame (an MPEG-TS file's clock starts anywhere)."""
    scale = FrameScaler(sampling.resolution)
    rate = float(stream.average_rate or stream.guessed_rate or 25)
    period = 1.0 / sampling.frame_rate
    index, shown, shown_time, end, start = 0, None, 0.0, 0.0, None
    for count, frame in enumerate(decoded_frames(container, stream)):
        stamp = _frame_time(frame, count, rate)
        start = stamp if start is None else start
        time = stamp - start
        while shown is not None and (index + 0.5) * period < time:
            yield index, shown.scaled()
            index += 1
        if shown is None or time >= shown_time:  # a frame stamped before the one shown is not shown
            shown, shown_time = _Shown(frame, scale), time
        length = float(frame.duration * frame.time_base) if getattr(frame, "duration", None) and frame.time_base \
            else 1.0 / rate
        end = max(end, time + length)
    if shown is None:
        raise VideoError(NO_FRAMES, "the video stream decodes to no frame")
    check_not_truncated(container, stream, end)
    while (index + 0.5) * period < end:
        yield index, shown.scaled()
        index += 1
    return end, shown.scaled(), index


def check_not_truncated(container, stream, end):
    """A :class:`VideoError` when the frames decoded, ending at ``end`` seconds from the video's start,
    stop well short (more than 1 s and 5%, or more than 10 s) of the length its header gives: the tail of
    a partial download or copy is missing, and FFmpeg takes the end of what is there for the end of the
    video.
    Every path that decodes calls it before it gives the video's length, so none takes such a file
    for a shorter video. A file that states no length lets any end pass (FFmpeg gives a cut MPEG-TS
    file the length of the timestamps it finds, and a bare stream none)."""
    stated = _stated_length(container, stream)
    # a frame or two of slack for headers that round, at most 10 s: an hour-long file cut by minutes is cut
    if stated is not None and end < stated - max(1.0, min(0.05 * stated, 10.0)):
        raise VideoError(TRUNCATED, f"it decodes to {end:.1f} s of the {stated:.1f} s its header gives; the rest is "
                                    f"missing, as in a partial download: replace it with the whole file and run again")


def _stated_length(container, stream):
    """The video's length in seconds as its header gives it: the stream's, else the container's where
    it holds nothing but video (an audio track may run longer than the pictures); None if unknown."""
    if stream.duration and stream.time_base:
        return float(stream.duration * stream.time_base)
    if container.duration and all(s.type == "video" for s in container.streams):
        return container.duration / 1_000_000  # in AV_TIME_BASE units
    return None


class _Shown:
    """The frame on screen, scaled only once a sample takes it: most decoded frames are never sampled."""

    def __init__(self, frame, scale):
        self.frame, self.scale, self._scaled = frame, scale, None

    def scaled(self):
        if self._scaled is None:
            self._scaled = self.scale(self.frame)
            self.frame = None
        return self._scaled


@dataclass
class Chunk:
    """Consecutive clips of one video: ``frames`` [K, F, S, S, 3] uint8 starting at clip ``first``;
    ``end`` (the video's length in seconds) is set on its last chunk."""
    first: int
    frames: np.ndarray
    end: float = None


def clip_chunks(path, sampling, clips_per_chunk):
    """The clips of the video at ``path`` in :class:`Chunk` s of up to ``clips_per_chunk`` clips."""
    container, stream = open_video(path)
    try:
        yield from _chunks(container, stream, sampling, clips_per_chunk)
    finally:
        container.close()


def _chunks(container, stream, sampling, clips_per_chunk):
    per_clip = sampling.frames_per_clip
    per_chunk = per_clip * clips_per_chunk
    buffer, first = [], 0
    samples = sampled_frames(container, stream, sampling)
    while True:
        try:
            _, frame = next(samples)
        except StopIteration as stop:
            end, last, count = stop.value
            break
        buffer.append(frame)
        if len(buffer) == per_chunk:
            yield Chunk(first, np.stack(buffer).reshape(clips_per_chunk, per_clip, *frame.shape))
            buffer, first = [], first + clips_per_chunk
    clips = max(1, math.ceil(end / sampling.clip_seconds - 1e-9))
    missing = clips * per_clip - count  # the last clip's samples past the video's end
    buffer.extend([last] * max(0, missing))
    del buffer[len(buffer) - max(0, -missing):]
    frames = np.stack(buffer).reshape(-1, per_clip, *last.shape) if buffer else np.zeros((0, per_clip, *last.shape),
                                                                                            np.uint8)
    yield Chunk(first, frames, end=end)
