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


def _run(paths, backbones, samplings, batch, together):
    rows = [[] for _ in backbones]
    start = time.perf_counter()
    for path in paths:
        if together:
            arrays, _ = encode_streams(path, backbones, samplings, batch)
        else:
            arrays = [encode_streams(path, [b], [s], batch)[0][0] for b, s in zip(backbones, samplings)]
        for i, a in enumerate(arrays):
            rows[i].append(a)
    return rows, time.perf_counter() - start


def measure_release_extraction(args, device):
    release = preset(args.release_preset)
    with tempfile.TemporaryDirectory() as scratch:
        backbones, weights = _backbones(args, scratch, device)
        samplings = [release.sampling(s, b.resolution, "bilinear") for s, b in zip(release.streams, backbones)]
        videos = os.path.join(scratch, "videos")
        os.makedirs(videos)
        write_videos(videos, args.extract_videos, args.extract_seconds, args.extract_size, args.extract_fps)
        paths = sorted(os.path.join(videos, n) for n in os.listdir(videos))
        results, outputs = {}, {}
        for label, together in (("one decode per stream (baseline)", False), ("one decode for both", True)):
            rows, wall = _run(paths, backbones, samplings, args.batch or 16, together)
            clips = [sum(len(r) for r in stream) for stream in rows]
            outputs[label] = rows
            results[label] = {"wall_s": wall, "clip_rows_per_s": clips[0] / wall, "slowfast_rows_per_s": clips[1] / wall,
                              "clips": clips, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
        a, b = outputs.values()
        same = all(np.array_equal(x, y) for s, t in zip(a, b) for x, y in zip(s, t))
    setting = {"preset": release.name, "weights": weights, "videos": args.extract_videos,
               "seconds": args.extract_seconds, "size": f"{args.extract_size[1]}x{args.extract_size[0]}",
               "fps": args.extract_fps, "slowfast_resolution": args.release_resolution,
               "batch_clips": args.batch or 16, "identical_rows": same}
    return {"setting": setting, "results": results}


def format_release_extraction(report):
    s = report["setting"]
    lines = [f"release extraction ({s['preset']}, weights {s['weights']}): {s['videos']} videos of {s['seconds']:g} s, "
             f"{s['size']} at {s['fps']:g} fps; SlowFast at {s['slowfast_resolution']} px, {s['batch_clips']} clips "
             f"per batch; {report['device']}, {report['machine']}",
             f"{'':<36}{'CLIP rows/s':>12}{'SlowFast rows/s':>16}{'wall s':>9}{'peak MiB':>10}"]
    for label, r in report["results"].items():
        lines.append(f"{label:<36}{r['clip_rows_per_s']:>12.2f}{r['slowfast_rows_per_s']:>16.2f}{r['wall_s']:>9.1f}"
                     f"{r['peak_rss_mib']:>10.0f}")
    base, ours = report["results"].values()
    lines.append(f"speed-up {base['wall_s'] / ours['wall_s']:.2f}x; rows identical: {s['identical_rows']} "
                 f"(peak memory is the process's, cumulative)")
    return "\n".join(lines)
