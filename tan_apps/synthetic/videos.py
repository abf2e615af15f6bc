"""The built-in video dataset: short synthetic videos in which coloured shapes
act out the moments their sentences describe, for a first run from video
files with nothing to download.

Each video is a dark, slightly noisy stage, tiled by two or three moments
with empty stretches between them. In a moment one shape of one colour
crosses the stage in one direction ("the red circle moves to the left"); no
two moments of a video share both colour and shape, and each is queried once.
Later moments often share the colour or the shape with an earlier one, so a
model has to read the whole sentence. Videos are H.264 MP4 files (MPEG-4
Part 2 where the FFmpeg at hand has no H.264 encoder) of 64 x 64 pixels at
10 frames per second, 8 to 20 seconds long.

Written under ROOT: ``videos/{vid}.mp4``, ``data/{split}.jsonl`` (the
Moment-DETR / lighthouse records, docs/data.md §9) and ``catalog.yaml``,
whose entries name the feature folders that ``tan-extract-features`` writes
(``features/clip``, ``features/video_transformer``, ``features/clip_text``).
"""
import json
import math
import os

import numpy as np

from tan.utils.io import atomic_write_text, replaced_when_done

SEED = 20261201
SIZE = 64
FPS = 10
RADIUS = 18  # of a shape, in pixels: about a quarter of the frame, so that it dominates what a backbone sees
SPLITS = {"train": 400, "test": 100}
# The long videos (generate(long=True)): 2 to 5 minutes, a moment of 2 to 12 s about every 25 s
LONG_SPLITS = {"train": 120, "test": 12}
LONG_SECONDS = (120.0, 300.0)
LONG_EVERY = 25.0
LONG_MOMENT_SECONDS = (2.0, 12.0)
COLOURS = {"red": (220, 40, 40), "green": (40, 200, 60), "blue": (50, 90, 230), "yellow": (230, 210, 40)}
SHAPES = ("circle", "square", "triangle")
DIRECTIONS = {"left": (-1, 0), "right": (1, 0), "up": (0, -1), "down": (0, 1)}
TEMPLATES = ("the {colour} {shape} moves {direction}.", "a {colour} {shape} slides {direction}.",
             "the {colour} {shape} goes {direction} across the screen.")
FEATURE_FOLDERS = ("features/clip", "features/video_transformer")
TEXT_FOLDER = "features/clip_text"


_GRID_Y, _GRID_X = np.mgrid[0:SIZE, 0:SIZE]


def _mask(shape, cx, cy, radius):
    dx, dy = _GRID_X - cx, _GRID_Y - cy
    if shape == "circle":
        return dx * dx + dy * dy <= radius * radius
    if shape == "square":
        return (np.abs(dx) <= radius * 0.85) & (np.abs(dy) <= radius * 0.85)
    return (dy >= -radius) & (dy <= radius) & (np.abs(dx) <= (dy + radius) / 2)  # a triangle, point up


def _path(direction, progress, radius):
    """Centre of a shape ``progress`` (0..1) of the way across the stage in ``direction``."""
    (ux, uy), low, high = DIRECTIONS[direction], radius, SIZE - 1 - radius
    along = low + (high - low) * progress
    across = SIZE / 2
    x = along if ux > 0 else (high + low - along if ux < 0 else across)
    y = along if uy > 0 else (high + low - along if uy < 0 else across)
    return x, y


def _place(rng, duration, count):
    """``count`` moments tiling [0, duration], each tile at least 2.5 s, the moment shrunk by up to
    30% of its tile at each end (the rest is an empty stage)."""
    while True:
        bounds = np.concatenate([[0.0], np.sort(rng.uniform(0, duration, count - 1)), [duration]])
        if np.diff(bounds).min() >= 2.5:
            break
    gaps = rng.uniform(0.0, 0.3, size=(count, 2)) * np.diff(bounds)[:, None]
    return [(round(float(a + g0), 2), round(float(b - g1), 2)) for a, b, (g0, g1) in zip(bounds[:-1], bounds[1:], gaps)]


def _actors(rng, count):
    """``count`` (colour, shape, direction), no two with the same colour and shape."""
    colours, chosen = list(COLOURS), []
    while len(chosen) < count:
        previous = chosen[-1] if chosen and rng.random() < 0.5 else None
        colour = previous[0] if previous is not None and rng.random() < 0.5 else colours[rng.integers(len(colours))]
        shape = previous[1] if previous is not None and colour != previous[0] else SHAPES[rng.integers(len(SHAPES))]
        if all((colour, shape) != (c, s) for c, s, _ in chosen):
            chosen.append((colour, shape, list(DIRECTIONS)[rng.integers(len(DIRECTIONS))]))
    return chosen


def render(rng, duration, moments, actors):
    """The frames [F, SIZE, SIZE, 3] uint8 of one video."""
    return np.stack(list(frames_of(rng, duration, moments, actors)))


def frames_of(rng, duration, moments, actors):
    """The frames of one video, one [SIZE, SIZE, 3] uint8 array at a time (a long video is never
    held whole): the stage's grain, and each moment's shape on its way across."""
    count = int(round(duration * FPS))
    base = rng.integers(20, 50, size=3)
    noise = np.clip(base + rng.normal(0, 4, size=(8, SIZE, SIZE, 3)), 0, 255)  # the stage's grain, 8 versions
    order = np.argsort([start for start, _ in moments], kind="stable")
    moments, actors = [moments[i] for i in order], [actors[i] for i in order]
    first = 0  # moments before this one have ended
    for k in range(count):
        time = (k + 0.5) / FPS
        frame = noise[rng.integers(len(noise))].copy()
        while first < len(moments) and moments[first][1] <= time:
            first += 1
        for (start, end), (colour, shape, direction) in zip(moments[first:], actors[first:]):
            if start > time:
                break
            if time < end:
                cx, cy = _path(direction, (time - start) / (end - start), RADIUS)
                frame[_mask(shape, cx, cy, RADIUS)] = COLOURS[colour]
        yield frame.astype(np.uint8)


def write_video(path, frames, fps=FPS, size=None):
    """``frames`` (an array [F, H, W, 3] uint8, or any iterable of [H, W, 3] frames with ``size``
    (H, W)) as a video file, atomically (H.264 if the FFmpeg at hand has it)."""
    import av
    from fractions import Fraction

    fps = Fraction(fps).limit_denominator(1001)
    codec = "libx264" if "libx264" in av.codecs_available else "mpeg4"
    height, width = size if size is not None else frames.shape[1:3]
    with replaced_when_done(path) as tmp:
        with av.open(tmp, "w", format="mp4") as container:
            stream = container.add_stream(codec, rate=fps)
            stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
            for frame in frames:
                for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                    container.mux(packet)
            for packet in stream.encode():
                container.mux(packet)


def long_video(seconds, moment_seconds=10.0, seed=0, every=30.0):
    """A long video of the dataset's stage: one queried moment of ``moment_seconds`` somewhere in it,
    and other moments (2 to 7 s, one about every ``every`` seconds) of every other colour and shape,
    some of them the queried one's colour or shape. Returns (duration, moments, actors, sentence, moment);
    :func:`write_long_video` writes it."""
    rng = np.random.default_rng([SEED, seed])
    if not 2 * moment_seconds <= seconds:
        raise ValueError(f"a long video of {seconds} s cannot hold a moment of {moment_seconds} s well inside it")
    colour, shape = list(COLOURS)[rng.integers(len(COLOURS))], SHAPES[rng.integers(len(SHAPES))]
    direction = list(DIRECTIONS)[rng.integers(len(DIRECTIONS))]
    start = round(float(rng.uniform(moment_seconds / 2, seconds - 1.5 * moment_seconds)), 2)
    moment = (start, round(start + moment_seconds, 2))
    others = [(c, s) for c in COLOURS for s in SHAPES if (c, s) != (colour, shape)]
    moments, actors, time = [moment], [(colour, shape, direction)], 0.0
    while True:
        time += float(rng.uniform(0.5, 1.5)) * every
        length = float(rng.uniform(2.0, 7.0))
        if time + length > seconds:
            break
        if time + length > moment[0] - 1.0 and time < moment[1] + 1.0:  # the queried moment's stage is its own
            continue
        c, s = others[rng.integers(len(others))]
        moments.append((round(time, 2), round(time + length, 2)))
        actors.append((c, s, list(DIRECTIONS)[rng.integers(len(DIRECTIONS))]))
    sentence = TEMPLATES[rng.integers(len(TEMPLATES))].format(colour=colour, shape=shape, direction=direction)
    return float(seconds), moments, actors, sentence, moment


def write_long_video(path, seconds, moment_seconds=10.0, seed=0):
    """Write :func:`long_video`'s video to ``path`` (rendered and encoded a frame at a time); returns
    {"video", "duration", "sentence", "moment", "other_moments"}."""
    duration, moments, actors, sentence, moment = long_video(seconds, moment_seconds, seed)
    frames = frames_of(np.random.default_rng([SEED, seed, 1]), duration, moments, actors)
    write_video(path, frames, size=(SIZE, SIZE))
    return {"video": path, "duration": duration, "sentence": sentence, "moment": list(moment),
            "other_moments": len(moments) - 1}


def _long_layout(rng, duration):
    """A long training video's moments and actors: one about every LONG_EVERY seconds (LONG_MOMENT_SECONDS
    long, at least a second of empty stage between two), no two of the same colour and shape, so that
    each sentence describes one moment of its video."""
    combos = [(c, s) for c in COLOURS for s in SHAPES]
    moments, actors, time = [], [], 0.0
    while len(moments) < len(combos):
        time += float(rng.uniform(0.5, 1.5)) * LONG_EVERY
        length = float(rng.uniform(*LONG_MOMENT_SECONDS))
        if time + length > duration - 1.0:
            break
        free = [combo for combo in combos if combo not in [a[:2] for a in actors]]
        colour, shape = free[rng.integers(len(free))]
        moments.append((round(time, 2), round(time + length, 2)))
        actors.append((colour, shape, list(DIRECTIONS)[rng.integers(len(DIRECTIONS))]))
        time += length + 1.0
    return moments, actors


def catalog(root_relative=True, long=False):
    """The catalog entries of the two splits (paths relative to DATASETS.ROOT = the dataset's folder)."""
    name = "synthetic_long_videos" if long else "synthetic_videos"
    return {f"{name}_{split}": {"annotations": f"data/{split}.jsonl", "format": "jsonl",
                                "features": list(FEATURE_FOLDERS), "text_features": TEXT_FOLDER}
            for split in SPLITS}


def generate(root, seed=SEED, splits=None, long=False):
    """Write the videos, annotations and catalog under ``root``; returns {split: number of queries}.

    ``long``: instead of the 8-20 s videos of two or three moments, videos of LONG_SECONDS with a
    moment about every LONG_EVERY seconds (the same stage, colours, shapes and sentences), for
    training by windows (INPUT.TRAIN_WINDOW) and grounding in hour-long videos."""
    rng = np.random.default_rng(seed)
    splits = dict((LONG_SPLITS if long else SPLITS) if splits is None else splits)
    os.makedirs(os.path.join(root, "videos"), exist_ok=True)
    counts, qid = {}, 0
    for split, videos in splits.items():
        lines = []
        for v in range(videos):
            if long:
                video = f"synvid_long_{split}_{v:04d}"
                duration = round(float(rng.uniform(*LONG_SECONDS)), 1)
                moments, actors = _long_layout(rng, duration)
                frames = frames_of(rng, duration, moments, actors)
                write_video(os.path.join(root, "videos", f"{video}.mp4"), frames, size=(SIZE, SIZE))
            else:
                video = f"synvid_{split}_{v:04d}"
                duration = round(float(rng.uniform(8, 20)), 1)
                count = int(rng.integers(2, 4))
                moments, actors = _place(rng, duration, count), _actors(rng, count)
                write_video(os.path.join(root, "videos", f"{video}.mp4"), render(rng, duration, moments, actors))
            for (start, end), (colour, shape, direction) in zip(moments, actors):
                sentence = TEMPLATES[rng.integers(len(TEMPLATES))].format(colour=colour, shape=shape,
                                                                          direction=direction)
                lines.append(json.dumps({"qid": qid, "query": sentence, "vid": video, "duration": duration,
                                         "relevant_windows": [[start, end]]}))
                qid += 1
        atomic_write_text(os.path.join(root, "data", f"{split}.jsonl"), "\n".join(lines) + "\n")
        counts[split] = len(lines)
    entries = {name: entry for name, entry in catalog(long=long).items() if name.rsplit("_", 1)[1] in splits}
    atomic_write_text(os.path.join(root, "catalog.yaml"), _yaml(entries))
    return counts


def _yaml(entries):
    """The catalog as YAML (plain enough to write by hand: names, strings and lists of strings)."""
    lines = ["# Written by tan-synthetic-videos: the synthetic video dataset's splits (docs/video.md)."]
    for name, entry in entries.items():
        lines.append(f"{name}:")
        for key, value in entry.items():
            text = "[" + ", ".join(value) + "]" if isinstance(value, list) else value
            lines.append(f"  {key}: {text}")
    return "\n".join(lines) + "\n"


def clip_count(duration, clip_seconds):
    return max(1, math.ceil(duration / clip_seconds - 1e-9))
