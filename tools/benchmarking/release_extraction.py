"""A release's two streams (CLIP and SlowFast, tools/benchmark.py
--release-extraction) made from video files, against the baseline of
decoding the file once per stream (what lighthouse's extractor does): the
same backbones, batches and threads, so the difference is the decoding.
Figures: clips per second of each stream, whether both give the same rows,
and the process's peak resident memory after each."""
import os
import resource
import tempfile
import time
import tracemalloc

import numpy as np

from tan.video.backbones import video_backbone
from tan.video.presets import preset
from tan.video.release import encode_streams

from benchmarking.extraction import write_videos


def _backbones(args, scratch, device):
    clip_model, slowfast_model = args.clip_model, args.slowfast_model
    if not clip_model:
        clip_model = os.path.join(scratch, "weights", "ViT-tiny.pt")
        video_backbone("clip").write_tiny(clip_model)
    if not slowfast_model:
        slowfast_model = os.path.join(scratch, "weights", "SLOWFAST_tiny.pkl")
        video_backbone("slowfast").write_tiny(slowfast_model)
    clip = video_backbone("clip")(clip_model, device)
    slowfast = video_backbone("slowfast")(slowfast_model, device, resolution=args.release_resolution)
    return [clip, slowfast], "given" if args.clip_model and args.slowfast_model else "tiny random (--write-tiny)"


def _warm_up(backbones, samplings, batch):
    """One untimed batch through each backbone: its first call pays for allocations and kernel choices."""
    for backbone, sampling in zip(backbones, samplings):
        backbone.encode(np.zeros((batch, sampling.frames_per_clip, sampling.resolution, sampling.resolution, 3),
                                 np.uint8))


def _run(paths, backbones, samplings, batch, together):
    rows = [[] for _ in backbones]
    tracemalloc.start()
    start = time.perf_counter()
    for path in paths:
        if together:
            arrays, _ = encode_streams(path, backbones, samplings, batch)
        else:
            arrays = [encode_streams(path, [b], [s], batch)[0][0] for b, s in zip(backbones, samplings)]
        for i, a in enumerate(arrays):
            rows[i].append(a)
    wall = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]  # NumPy's arrays: the frames in flight
    tracemalloc.stop()
    return rows, wall, peak


def measure_release_extraction(args, device):
    release = preset(args.release_preset)
    with tempfile.TemporaryDirectory() as scratch:
        backbones, weights = _backbones(args, scratch, device)
        samplings = [release.sampling(s, b.resolution, "bilinear") for s, b in zip(release.streams, backbones)]
        paths = list(args.release_videos or [])
        if not paths:
            videos = os.path.join(scratch, "videos")
            os.makedirs(videos)
            write_videos(videos, args.extract_videos, args.extract_seconds, args.extract_size, args.extract_fps)
            paths = sorted(os.path.join(videos, n) for n in os.listdir(videos))
        _warm_up(backbones, samplings, args.batch or 16)
        results, outputs = {}, {}
        modes = [("one decode for both", True)]
        if not args.release_only:
            modes.insert(0, ("one decode per stream (baseline)", False))
        for label, together in modes:
            rows, wall, peak = _run(paths, backbones, samplings, args.batch or 16, together)
            clips = [sum(len(r) for r in stream) for stream in rows]
            outputs[label] = rows
            results[label] = {"wall_s": wall, "clip_rows_per_s": clips[0] / wall,
                              "slowfast_rows_per_s": clips[1] / wall, "clips": clips, "frames_peak_mib": peak / 2 ** 20,
                              "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
        runs = list(outputs.values())
        same = None if len(runs) < 2 else all(np.array_equal(x, y) for s, t in zip(*runs) for x, y in zip(s, t))
    videos = (f"{len(paths)} files ({', '.join(os.path.basename(p) for p in paths[:3])})" if args.release_videos else
              f"{args.extract_videos} videos of {args.extract_seconds:g} s, {args.extract_size[1]}x"
              f"{args.extract_size[0]} at {args.extract_fps:g} fps")
    setting = {"preset": release.name, "weights": weights, "videos": videos,
               "slowfast_resolution": args.release_resolution, "batch_clips": args.batch or 16, "identical_rows": same}
    return {"setting": setting, "results": results}


def format_release_extraction(report):
    s = report["setting"]
    lines = [f"release extraction ({s['preset']}, weights {s['weights']}): {s['videos']}; SlowFast at "
             f"{s['slowfast_resolution']} px, {s['batch_clips']} clips per batch; {report['device']}, "
             f"{report['machine']}",
             f"{'':<36}{'CLIP rows/s':>12}{'SlowFast rows/s':>16}{'wall s':>9}{'frames MiB':>11}{'RSS MiB':>9}"]
    for label, r in report["results"].items():
        lines.append(f"{label:<36}{r['clip_rows_per_s']:>12.2f}{r['slowfast_rows_per_s']:>16.2f}{r['wall_s']:>9.1f}"
                     f"{r['frames_peak_mib']:>11.0f}{r['peak_rss_mib']:>9.0f}")
    runs = list(report["results"].values())
    if len(runs) == 2:
        lines.append(f"speed-up {runs[0]['wall_s'] / runs[1]['wall_s']:.2f}x; rows identical: {s['identical_rows']}")
    lines.append("frames MiB: the peak of NumPy's arrays during the run (the frames in flight); RSS MiB: the "
                 "process's peak so far, models included")
    return "\n".join(lines)
