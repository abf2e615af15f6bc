"""The extractor's throughput (tools/benchmark.py --extraction): videos of a
given length and frame size (rendered like the synthetic videos, so no file
is needed) through one backbone, decoded in the main process (the baseline:
decoding and the backbone take turns) and in worker processes beside it.
Figures: videos per second and seconds of video per second of wall time."""
import os
import tempfile
import time

import numpy as np

from tan.video.backbones import video_backbone
from tan.video.extract import backbone_sampling, extract_videos, list_videos
from tan_apps.synthetic.videos import write_video


def write_videos(folder, count, seconds, size, fps):
    rng = np.random.default_rng(0)
    height, width = size
    for i in range(count):
        frames = np.empty((int(seconds * fps), height, width, 3), np.uint8)
        for k in range(len(frames)):  # a moving bar on noise: every frame differs, as in a real video
            frames[k] = rng.integers(0, 60, size=(height, width, 3), dtype=np.uint8)
            frames[k, :, (k * 4) % width:(k * 4) % width + width // 8] = (200, 60, 60)
        write_video(os.path.join(folder, f"v{i:03d}.mp4"), frames, fps)


def measure_extraction(args, device):
    """{"setting": ..., "results": {label: {...}}} of --extraction."""
    model = args.extract_model
    with tempfile.TemporaryDirectory() as scratch:
        if not model:
            model = os.path.join(scratch, "tiny")
            video_backbone(args.extract_backbone).write_tiny(model)
        videos = os.path.join(scratch, "videos")
        os.makedirs(videos)
        write_videos(videos, args.extract_videos, args.extract_seconds, args.extract_size, args.extract_fps)
        backbone = video_backbone(args.extract_backbone)(model, device)
        sampling = backbone_sampling(backbone, args.extract_clip_seconds)
        listed = list_videos([videos])
        results = {}
        for label, workers in (("decoding in the main process", 0), (f"{args.workers} decoding workers",
                                                                     args.workers)):
            out = os.path.join(scratch, f"out{workers}")
            start = time.perf_counter()
            summary = extract_videos(listed, backbone, sampling, out, args.batch or 16, workers)
            wall = time.perf_counter() - start
            results[label] = {"videos_per_s": len(summary.written) / wall,
                              "video_seconds_per_s": len(summary.written) * args.extract_seconds / wall,
                              "clips": summary.clips, "wall_s": wall}
    setting = {"backbone": args.extract_backbone, "model": args.extract_model or "tiny random (--write-tiny)",
               "videos": args.extract_videos, "seconds": args.extract_seconds,
               "size": f"{args.extract_size[1]}x{args.extract_size[0]}", "fps": args.extract_fps,
               "clip_seconds": args.extract_clip_seconds, "frames_per_clip": sampling.frames_per_clip,
               "resolution": sampling.resolution, "batch_clips": args.batch or 16}
    return {"setting": setting, "results": results}


def format_extraction(report):
    s = report["setting"]
    lines = [f"extraction: {s['backbone']} ({s['model']}), {s['videos']} videos of {s['seconds']:g} s, {s['size']} "
             f"at {s['fps']:g} fps; {s['clip_seconds']:g} s clips of {s['frames_per_clip']} frames at "
             f"{s['resolution']} px, {s['batch_clips']} clips per batch; {report['device']}, {report['machine']}",
             f"{'':<32}{'videos/s':>10}{'video s/s':>12}{'wall s':>9}"]
    for label, r in report["results"].items():
        lines.append(f"{label:<32}{r['videos_per_s']:>10.2f}{r['video_seconds_per_s']:>12.1f}{r['wall_s']:>9.1f}")
    return "\n".join(lines)
