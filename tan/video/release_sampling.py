"""The frames of the benchmarks' released features: the sampling of HERO's
extractor (linjieli222/HERO_Video_Feature_Extractor), which made the CLIP and
SlowFast rows of QVHighlights and of lighthouse's Charades-STA, TACoS and
ActivityNet, with every stream taken from one decode of the file.

HERO runs FFmpeg's filters ``fps``, ``scale`` (the shorter side to 224, the
other side truncated to whole pixels) and ``crop`` (the centre square) and
reads RGB. The same filters run here in PyAV's FFmpeg on each decoded frame,
once per stream, so the pixels are FFmpeg's own (checked equal, byte for
byte, to the ``ffmpeg`` command). Two streams:

- ``images`` (CLIP): the ``fps`` filter at 1 / clip length; each frame it
  gives is one row (the frame on screen about the middle of each clip).
- ``clips`` (SlowFast): the ``fps`` filter at 30 frames a second; frames are
  padded to whole seconds with the last frame, then to whole clips with the
  last second, and cut into clips; the clips after ceil(duration / clip
  length) are dropped. Each clip keeps 32 frames chosen as HERO chooses
  them: ``linspace(0, 64 * fps / 30 - 1, 32)`` clamped to the clip, where
  fps is the source's average frame rate rounded down. That span is
  PySlowFast's for frames at the source's rate, applied to frames already
  at 30 a second: kept as it is, since the released rows were made so
  (a 60 fps video's clips end on 17 copies of their last frame).

Where HERO fails, this does better and says so (docs/video.md §7): frames
are turned upright as players show them (HERO scales a rotated video by its
stored size and squashes it), a video shorter than a clip keeps the clip
length (HERO changes CLIP's frame rate, so its rows stop being clips), a
video whose frame rate or length its header does not give is read, the
images stream gives at least one row, and a file cut short of the length its
header gives (a partial download) is refused: its rows would cover only the
part that is there, under the header's length.
"""
import math
from dataclasses import dataclass

import numpy as np
import torch

from ..errors import TanError
from .decode import (NO_FRAMES, Chunk, VideoError, check_not_truncated, decoded_frames, decoder_version,
                     open_video)

SCALERS = ("bilinear", "bicubic")
DECODE_RATE = 30  # HERO's target frame rate for SlowFast
FAST_FRAMES, SAMPLING_RATE = 32, 2  # PySlowFast's NUM_FRAMES and SAMPLING_RATE of SlowFast 8x8


@dataclass(frozen=True)
class ReleaseSampling:
    """How one released stream's frames were taken: ``kind`` "images" (a frame per clip) or "clips"
    (``DECODE_RATE`` frames a second, 32 a clip chosen as HERO does), ``clip_seconds`` a whole
    number, frames ``resolution`` square, scaled with FFmpeg's ``scaler``."""
    kind: str
    clip_seconds: float
    resolution: int = 224
    scaler: str = "bilinear"

    def __post_init__(self):
        if self.kind not in ("images", "clips"):
            raise ValueError(f"release sampling {self.kind!r}: expected 'images' or 'clips'")
        if not (self.clip_seconds >= 1 and float(self.clip_seconds).is_integer()):
            raise ValueError(f"clip length {self.clip_seconds!r}: the released features' sampling takes a whole "
                             f"number of seconds (1 or more)")
        if self.scaler not in SCALERS:
            raise ValueError(f"scaler {self.scaler!r}: expected one of {', '.join(SCALERS)}")
        if not (isinstance(self.resolution, int) and self.resolution > 0):
            raise ValueError(f"resolution {self.resolution!r}: expected a positive number of pixels")

    @property
    def frame_rate(self):
        return DECODE_RATE if self.kind == "clips" else 1.0 / self.clip_seconds

    @property
    def frames_per_clip(self):
        return FAST_FRAMES if self.kind == "clips" else 1

    def fields(self):
        """This sampling's fields of an extractor record."""
        return {"sampling": f"release-{self.kind}", "frame_rate": self.frame_rate,
                "clip_seconds": float(self.clip_seconds), "frames_per_clip": self.frames_per_clip,
                "resolution": self.resolution, "scaler": self.scaler}


def sampling_of_record(record):
    """The :class:`ReleaseSampling` an extractor record describes, or None when it was sampled otherwise."""
    kind = str(record.get("sampling", ""))
    if not kind.startswith("release-"):
        return None
    return ReleaseSampling(kind[len("release-"):], record["clip_seconds"], record["resolution"],
                           record.get("scaler", "bilinear"))


@dataclass(frozen=True)
class VideoFacts:
    """What the header says: frames a second (the average, rounded down as HERO's probe does; None if
    not given), the video stream's length in seconds (None if not given), the rotation to show it upright."""
    frame_rate: int
    duration: float
    rotation: int


def video_facts(stream, first_frame, timed=True):
    """The :class:`VideoFacts` of ``stream``; ``timed``: whether its frames carry times (a bare stream's
    do not, and its rate is the one FFmpeg stamps them at)."""
    rate = (stream.average_rate or stream.guessed_rate) if timed else (stream.guessed_rate or stream.average_rate)
    rate = math.floor(float(rate)) if rate else None
    duration = float(stream.duration * stream.time_base) if stream.duration and stream.time_base else None
    rotation = int(round(getattr(first_frame, "rotation", 0) or 0)) % 360
    return VideoFacts(rate or None, duration, rotation)


def fast_indices(clip_frames, source_rate):
    """HERO's 32 fast-pathway frames of a clip of ``clip_frames`` frames decoded at 30 a second, for a
    source of ``source_rate`` frames a second (float32 linspace, clamped, truncated, as HERO computes it)."""
    span = FAST_FRAMES * SAMPLING_RATE * (source_rate or DECODE_RATE) / DECODE_RATE
    index = torch.linspace(0.0, span - 1, FAST_FRAMES)
    return torch.clamp(index, 0, clip_frames - 1).long().numpy()


# FFmpeg's own turn of a rotated video, as its command-line tool inserts it (upright, as players show it)
_TURNS = {90: ("transpose", "cclock"), 180: None, 270: ("transpose", "clock")}


def _frame_size(width, height, rotation):
    return (height, width) if rotation in (90, 270) else (width, height)


def scaled_size(width, height, resolution):
    """HERO's output size: the shorter side to ``resolution``, the longer one truncated to whole pixels."""
    if height >= width:
        return resolution, int(height * resolution / width)
    return int(width * resolution / height), resolution


class FrameGraph:
    """One stream's FFmpeg filters: (turn upright) -> fps (``rate``; None: every frame) -> scale ->
    centre crop -> RGB."""

    def __init__(self, stream, facts, rate, resolution, scaler, width, height):
        import av.filter

        graph = av.filter.Graph()
        chain = [graph.add_buffer(template=stream)]
        turn = _TURNS.get(facts.rotation)
        if facts.rotation == 180:
            chain += [graph.add("hflip"), graph.add("vflip")]
        elif turn:
            chain.append(graph.add(*turn))
        out_w, out_h = scaled_size(*_frame_size(width, height, facts.rotation), resolution)
        left, top = int((out_w - resolution) / 2), int((out_h - resolution) / 2)
        chain += [graph.add("fps", f"fps={rate!r}")] if rate else []
        chain += [graph.add("scale", f"{out_w}:{out_h}:flags={scaler}"),
                  graph.add("crop", f"{resolution}:{resolution}:{left}:{top}"), graph.add("format", "rgb24"),
                  graph.add("buffersink")]
        for a, b in zip(chain, chain[1:]):
            a.link_to(b)
        graph.configure()
        self.graph, self.source, self.sink = graph, chain[0], chain[-1]  # the graph owns the filters

    def push(self, frame):
        """The RGB frames [S, S, 3] uint8 that ``frame`` (None: the end) lets out."""
        import av

        self.source.push(frame)
        out = []
        while True:
            try:
                out.append(self.sink.pull().to_ndarray())
            except (av.error.BlockingIOError, av.error.EOFError):
                return out


class _Images:
    """A row per frame that the ``fps`` filter gives, at least one."""

    def __init__(self, graph, facts, sampling):  # noqa: ARG002  (the clips' signature)
        self.graph, self.count, self.last = graph, 0, None

    def push(self, frame):
        self.last = frame if frame is not None else self.last
        out = self.graph.push(frame)
        self.count += len(out)
        return [o[None] for o in out]

    def finish(self, fallback):
        out = self.push(None)
        if self.count == 0 and self.last is not None:  # shorter than half a clip: the fps filter gives nothing
            out = [fallback.push(self.last)[0][None]]
        return out


class _Clips:
    """HERO's clips: 30 frames a second, padded to whole seconds with the last frame and to whole
    clips with the last second, 32 frames of each kept; none after ceil(duration / clip length)."""

    def __init__(self, graph, facts, sampling):
        self.graph = graph
        self.length = int(DECODE_RATE * sampling.clip_seconds)
        self.keep = fast_indices(self.length, facts.frame_rate)
        self.limit = math.ceil(facts.duration / sampling.clip_seconds) if facts.duration else None
        self.buffer, self.made = [], 0

    def push(self, frame):
        out = []
        for picture in self.graph.push(frame):
            self.buffer.append(picture)
            if len(self.buffer) == self.length:
                out += self._clip()
        return out

    def _clip(self):
        frames, self.buffer = self.buffer, []
        if self.limit is not None and self.made >= self.limit:
            return []
        self.made += 1
        return [np.stack([frames[i] for i in self.keep])]

    def finish(self, fallback):
        out = self.push(None)
        if self.buffer:
            second = DECODE_RATE
            whole = -(-len(self.buffer) // second) * second
            self.buffer += [self.buffer[-1]] * (whole - len(self.buffer))
            last_second = self.buffer[-second:]
            while len(self.buffer) < self.length:
                self.buffer += last_second
            out += self._clip()
        return out


def release_chunks(path, samplings, clips_per_chunk=16):
    """Every stream of ``samplings`` ([:class:`ReleaseSampling`]) from one decode of the video at
    ``path``: (stream index, :class:`Chunk` of up to ``clips_per_chunk`` clips [K, F, S, S, 3]); each
    stream's last chunk carries the video's length (the header's, else the end of its last frame). A
    file that decodes well short of its header's length is a :class:`VideoError` before the last chunks."""
    container, stream = open_video(path)
    try:
        yield from _release_chunks(container, stream, samplings, clips_per_chunk)
    finally:
        container.close()


def _restamped(frames, container, stream):
    """The frames on the clock FFmpeg's command puts them on before its filters: counted from the
    file's start (an MPEG-TS clock starts anywhere), and a frame with no time stamped one frame after
    the one before (a raw .h264 stream has none; the ``fps`` filter would drop it)."""
    base = stream.time_base
    rate = float(stream.guessed_rate or stream.average_rate or DECODE_RATE)  # FFmpeg's own guess, as its command
    step = max(1, round(1 / (rate * float(base)))) if base else 1
    origin, previous = None, None
    if container.start_time is not None and base:
        origin = round(container.start_time / 1_000_000 / float(base))  # in AV_TIME_BASE units
    for frame in frames:
        if frame.pts is None:
            frame.pts = 0 if previous is None else previous + step
            frame.time_base = base
        else:
            origin = frame.pts if origin is None else origin
            frame.pts -= origin
        previous = frame.pts
        yield frame


def _release_chunks(container, stream, samplings, clips_per_chunk):
    decoded = decoded_frames(container, stream)
    first = next(decoded, None)
    if first is None:
        raise VideoError(NO_FRAMES, "the video stream decodes to no frame")
    if not hasattr(first, "rotation"):
        raise TanError(f"the released features' sampling needs PyAV 15 or newer (to turn rotated videos upright); "
                       f"this is {decoder_version()}: pip install 'av>=15'")
    facts = video_facts(stream, first, timed=first.pts is not None)
    frames = _restamped(_chained(first, decoded), container, stream)
    first = next(frames)
    width, height = first.width, first.height
    pipes = [(_Clips if s.kind == "clips" else _Images)(
        FrameGraph(stream, facts, s.frame_rate, s.resolution, s.scaler, width, height), facts, s) for s in samplings]
    pending = [[] for _ in samplings]
    made = [0] * len(samplings)
    end, rate = 0.0, float(stream.average_rate or stream.guessed_rate or DECODE_RATE)
    for frame in _chained(first, frames):
        end = max(end, float(frame.pts * frame.time_base) + _frame_length(frame, rate))
        for i, pipe in enumerate(pipes):
            pending[i] += pipe.push(frame)
            while len(pending[i]) >= clips_per_chunk:
                yield i, Chunk(made[i], np.stack(pending[i][:clips_per_chunk]))
                made[i] += clips_per_chunk
                del pending[i][:clips_per_chunk]
    check_not_truncated(container, stream, end)  # before the last chunks, which give the header's length
    duration = facts.duration or end
    for i, (pipe, sampling) in enumerate(zip(pipes, samplings)):
        fallback = FrameGraph(stream, facts, None, sampling.resolution, sampling.scaler, width, height)
        pending[i] += pipe.finish(fallback)
        for at in range(0, max(len(pending[i]), 1), clips_per_chunk):
            part = pending[i][at:at + clips_per_chunk]
            last = at + clips_per_chunk >= len(pending[i])
            frames_of = np.stack(part) if part else np.zeros((0, sampling.frames_per_clip, sampling.resolution,
                                                               sampling.resolution, 3), np.uint8)
            yield i, Chunk(made[i] + at, frames_of, end=duration if last else None)


def _chained(first, rest):
    yield first
    yield from rest


def _frame_length(frame, rate):
    if getattr(frame, "duration", None) and frame.time_base:
        return float(frame.duration * frame.time_base)
    return 1.0 / rate
