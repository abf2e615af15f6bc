"""Windowed grounding of long videos (tan/engine/long_videos/windows.py): seconds per query and peak memory,
for videos of several lengths, beside the same videos scored whole (resampled to the model's
clips, what every video got before windows), and by windows with a relevance stage
(tan/engine/long_videos/relevance_stage.py: the model with a relevance head, MODEL.RELEVANCE, whose full map
scores each sentence's top TEST.WINDOW.TOP_K windows only) beside every window scored.

Each (length, way) is measured in a fresh process, so that no allocator cache or peak is shared:
a model of the config with random weights (what it computes does not depend on what it learned),
a video of random features at one row per second (ROWS_PER_SECOND), SENTENCES sentences of
random word vectors asked through the API (tan.load_model). The time is the video's encoding and
the sentences' grounding, per sentence; the peak is the process's resident high-water mark
(Linux's VmHWM, reset once the features are in memory) above where it stood, with the C library
set to map every large block afresh so that resident memory follows what is allocated.

Run as a script it measures one (length, way) and prints JSON:
    python tools/benchmarking/long_videos.py --seconds 3600 --way relevance --config-file FILE --window-length 60
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

ROWS_PER_SECOND = 1.0
SENTENCES = 8
WORDS = 10
MMAP_THRESHOLD = 1 << 20
DEFAULT_SECONDS = (600, 3600, 7200)


def measure(config_file, seconds, way, window_length, device, opts=()):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from benchmarking.saved_memory import peak_growth, reset_peak
    from tan.api import Grounder
    from tan.config import load_config
    from tan.modeling import build_model

    overrides = ["MODEL.DEVICE", device, "TEST.WINDOW.ENABLED", str(way != "whole"),
                 "TEST.WINDOW.LENGTH", str(float(window_length)), "MODEL.RELEVANCE.ENABLED", str(way == "relevance"),
                 "INPUT.TRAIN_WINDOW.RANKED_WINDOWS", "4", *opts]
    cfg = load_config(config_file, overrides)
    torch.manual_seed(0)
    model = build_model(cfg).to(device).eval()
    grounded = []  # sentence-window pairs the full model scores
    ground = model.ground
    model.ground = lambda maps, queries, *rest, **kw: (grounded.append(len(queries)), ground(maps, queries, *rest,
                                                                                            **kw))[1]
    grounder = Grounder(model, cfg, torch.device(device))
    rng = np.random.default_rng(0)
    feats = rng.random((int(seconds * ROWS_PER_SECOND), cfg.MODEL[cfg.MODEL.ARCHITECTURE].FEATPOOL.INPUT_SIZE),
                       dtype=np.float32)
    sentences = [torch.from_numpy(rng.normal(size=(WORDS, cfg.INPUT.PRE_QUERY_SIZE)).astype(np.float32))
                 for _ in range(SENTENCES)]
    grounder.encode_sentences = lambda asked: sentences[:len(asked)]  # random word vectors: no vector file
    asked = [f"sentence {i}" for i in range(SENTENCES)]
    grounder.ground(grounder.encode_video(feats[:int(window_length * ROWS_PER_SECOND)], window_length), asked[:1])
    grounded.clear()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = reset_peak()
    tick = time.perf_counter()
    video = grounder.encode_video(feats, float(seconds))
    grounder.ground(video, asked, topk=5)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - tick
    growth = peak_growth(start)
    windows = len(video.windows.spans) if video.windows is not None else 0
    return {"seconds": seconds, "way": way, "windows": windows, "seconds_per_query": elapsed / SENTENCES,
            "maps_per_query": sum(grounded) / SENTENCES,
            "peak_growth_mb": growth / 2 ** 20 if growth is not None else None,
            "gpu_peak_mb": torch.cuda.max_memory_allocated() / 2 ** 20 if device.startswith("cuda") else None,
            "features_mb": feats.nbytes / 2 ** 20}


def in_fresh_process(config_file, seconds, way, window_length, device, opts=()):
    cmd = [sys.executable, os.path.abspath(__file__), "--config-file", os.path.abspath(config_file),
           "--seconds", str(seconds), "--way", way, "--window-length", str(window_length), "--device", device,
           *opts]
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_=str(MMAP_THRESHOLD))
    env["PYTHONPATH"] = repo + os.pathsep + env.get("PYTHONPATH", "")
    with tempfile.TemporaryDirectory() as cwd:  # nothing is written; a clean folder says so
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    if proc.returncode:
        raise RuntimeError(f"measuring a {seconds} s video ({way}) failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


WAYS = ("whole", "windows", "relevance")


def format_report(report):
    """Whole, by every window (the baseline of the relevance stage) and by the top windows, side by side,
    per video length: seconds and queries per second, the maps the full model computes per query, peaks."""
    lines = [f"grounding {SENTENCES} sentences in one long video ({report['config']}, random weights, features at "
             f"{ROWS_PER_SECOND:g} row/s, windows of {report['window_length']:g} s every half of it, "
             f"batches of {report['window_batch']}, top {report['top_k']} windows with the relevance stage; "
             f"{report['device']}: {report['machine']}, torch {report['torch']}); a fresh process each; "
             f"peak = resident growth over the encoding and grounding (MB)",
             "| video | whole: queries/s | peak MB | windows | every window: queries/s | maps/query | peak MB "
             "| top windows: queries/s | maps/query | peak MB | speed-up over every window |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    peak = "gpu_peak_mb" if report["device"].startswith("cuda") else "peak_growth_mb"
    for seconds in report["lengths"]:
        whole, every, top = (report["results"][f"{seconds}/{way}"] for way in WAYS)
        lines.append(f"| {seconds / 60:g} min | {1 / whole['seconds_per_query']:.1f} | {_mb(whole[peak])} | "
                     f"{every['windows']} | {1 / every['seconds_per_query']:.2f} | {every['maps_per_query']:g} | "
                     f"{_mb(every[peak])} | {1 / top['seconds_per_query']:.2f} | {top['maps_per_query']:g} | "
                     f"{_mb(top[peak])} | {every['seconds_per_query'] / top['seconds_per_query']:.1f}x |")
    return "\n".join(lines)


def _mb(value):
    return "n/a" if value is None else f"{value:.1f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config-file", required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--way", choices=WAYS, required=True)
    parser.add_argument("--window-length", type=float, default=60.0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("opts", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    print(json.dumps(measure(args.config_file, args.seconds, args.way, args.window_length, args.device, args.opts)))


if __name__ == "__main__":
    main()
