#!/usr/bin/env python
"""Measure training and inference speed, peak memory, the predictor's achieved
TFLOP/s, evaluation time per query and data-loading throughput, for our
implementation and (side by side) a baseline computed the reference's way.

Inputs are random tensors of the config's real shapes, so no dataset is
needed; data loading is measured only when the config's training data is on
disk. KEY VALUE overrides (SOLVER.AMP bf16, SOLVER.COMPILE True, ...) apply to
our implementation; the baseline always runs float32 with torch's defaults
(cuDNN's TF32 convolutions, no autotuning; MS-2D-TAN's with autotuning, as
its experiment files ask), as the reference does. On the CPU, whether the
allocator keeps freed memory between steps (CPU_KEEP_FREED_MEMORY, default
True) is a setting of the process: it applies to both, and the report says it.

The model is the config's MODEL.ARCHITECTURE: 2D-TAN ("TAN"), MMN or
MS-2D-TAN ("MS_TAN", baseline tests/oracles/reference_ms2dtan.py; its
batches are queries with videos of different lengths: training windows,
whole test videos); --preset picks that architecture's small setting.

Examples:
  python tools/benchmark.py --config-file configs/2dtan_128x128_pool_k5l8_tacos.yaml --device cuda SOLVER.AMP bf16
  python tools/benchmark.py --preset cpu-small --device cpu --json small.json
  python tools/benchmark.py --config-file configs/2dtan_64x64_pool_k9l4_activitynet.yaml --only eval
  python tools/benchmark.py --preset cpu-small --device cpu --impl ours --only train,inference SOLVER.AMP bf16
  python tools/benchmark.py --config-file configs/ms2dtan_charades_i3d.yaml --device cuda
  python tools/benchmark.py --config-file configs/ms2dtan_charades_i3d.yaml --preset cpu-small --device cpu
  python tools/benchmark.py --extraction --extract-backbone clip --device cpu --workers 2

--saved-memory measures, for 2D-TAN, what one training step keeps for its backward as autograd
holds it (tools/benchmarking/saved_memory.py: every saved tensor's whole storage, per sample) and
the process's peak growth over the step, each in a fresh process, beside chenjoya/2dtan's own
code when --reference-code names its checkout (--batch 8: one process's batch of the reference's
TACoS training, its batch of 32 divided among 4 GPUs):
  python tools/benchmark.py --saved-memory --reference-code ../2dtan
  python tools/benchmark.py --saved-memory --reference-code ../2dtan --batch 8

--long-videos measures windowed grounding (tools/benchmarking/long_videos.py): one video of
each length (features at 1 row per second) scored whole, by every window and by each sentence's
top TEST.WINDOW.TOP_K windows (a relevance head), queries per second, maps computed per query and
peak memory, each in a fresh process:
  python tools/benchmark.py --long-videos --device cpu

--release-extraction measures a release's CLIP and SlowFast streams (tools/benchmarking/
release_extraction.py) made from one decode of each video against one decode per stream, with
the same backbones (tiny random ones unless --clip-model and --slowfast-model name real weights):
  python tools/benchmark.py --release-extraction --device cpu --extract-videos 2 --extract-seconds 30

--extraction measures tan-extract-features instead (tools/benchmarking/extraction.py):
videos rendered on the fly through one backbone (a tiny random one unless
--extract-model names real weights), decoded in the main process beside
decoded in --workers processes.
"""
import argparse
import json
import os
import platform
import sys
import textwrap

import checkout_path  # noqa: F401  (this checkout's tan first on sys.path)
import torch

from benchmarking import mmn_workloads as M
from benchmarking import ms2dtan_workloads as MS
from benchmarking import extraction, long_videos, release_extraction, saved_memory, sweep
from benchmarking import workloads as W
from benchmarking.memory import step_memory
from tan_apps.cli.exit_codes import run_cli
from tan.config import load_config
from tan.config.setup import merge_overrides
from tan.data import RunData
from tan.engine.cpu_allocator import keep_freed_memory, keeps_freed_memory
from tan.engine.precision import amp_is_emulated, configure_backends, slow_amp_warning
from tan.errors import TanError
from tan.utils.io import atomic_write_text

TACOS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "configs", "2dtan_128x128_pool_k5l8_tacos.yaml")
SYNTHETIC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "configs", "2dtan_synthetic.yaml")
# Presets: keys shared by the architectures of SHARED_KEYS ("NUM_CLIPS" means
# MODEL.{ARCHITECTURE}.NUM_CLIPS), then keys of one architecture only.
SHARED_KEYS = ("TAN", "MMN")  # 2D-TAN's layout of keys (FEAT2D, FEATPOOL, PREDICTOR)
PRESETS = {
    # The small CPU setting: N 32, hidden 128, K 5, 4 layers; MMN with the GloVe + LSTM encoder;
    # MS-2D-TAN keeps its config's window, clips, scales and sentence LSTM layers, with 64
    # channels throughout and 5 x 5 map convs (configs/ms2dtan_synthetic.yaml's sizes).
    "cpu-small": {
        "shared": ["NUM_CLIPS", "32", "FEAT2D.POOLING_COUNTS", "[15, 8]", "FEATPOOL.KERNEL_SIZE", "2",
                   "FEATPOOL.INPUT_SIZE", "500", "FEATPOOL.HIDDEN_SIZE", "128", "PREDICTOR.HIDDEN_SIZE", "128",
                   "PREDICTOR.KERNEL_SIZE", "5", "PREDICTOR.NUM_STACK_LAYERS", "4"],
        "TAN": ["INPUT.NUM_PRE_CLIPS", "64", "MODEL.TAN.INTEGRATOR.QUERY_HIDDEN_SIZE", "128"],
        "MMN": ["INPUT.NUM_PRE_CLIPS", "64", "MODEL.MMN.JOINT_SPACE_SIZE", "128",
                "MODEL.MMN.TEXT_ENCODER.NAME", "LSTM", "MODEL.MMN.TEXT_ENCODER.LSTM.HIDDEN_SIZE", "128",
                "MODEL.MMN.TEXT_ENCODER.LSTM.NUM_LAYERS", "1"],
        "MS_TAN": ["MODEL.MS_TAN.CLIP_MODULE.HIDDEN_SIZE", "64", "MODEL.MS_TAN.FUSION_MODULE.TXT_HIDDEN_SIZE", "64",
                   "MODEL.MS_TAN.MAP_MODULE.HIDDEN_SIZES", "[64, 64]", "MODEL.MS_TAN.MAP_MODULE.KERNEL_SIZES", "[5, 5]",
                   "MODEL.MS_TAN.MAP_MODULE.PADDINGS", "[2, 2]"],
    },
}


def preset_overrides(name, architecture):
    """The KEY VALUE list of preset ``name`` for ``architecture``."""
    if not name:
        return []
    preset = PRESETS[name]
    if architecture not in preset:
        raise TanError(f"--preset {name} has no settings for MODEL.ARCHITECTURE {architecture!r} "
                       f"(it has {', '.join(k for k in preset if k != 'shared')})")
    shared = preset["shared"] if architecture in SHARED_KEYS else []
    keys = [f"MODEL.{architecture}.{k}" for k in shared[0::2]]
    return [x for pair in zip(keys, shared[1::2]) for x in pair] + preset[architecture]
WORKLOADS = ("train", "memory", "inference", "predictor", "eval", "data")


def _workloads(text):
    names = [x.strip() for x in text.split(",") if x.strip()]
    unknown = [x for x in names if x not in WORKLOADS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown workload(s) {unknown or text!r}; choose from {','.join(WORKLOADS)}")
    return names


def _seconds_list(text):
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        values = []
    if not values or any(not v > 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected seconds > 0 separated by commas, got {text!r}")
    return values


def add_release_arguments(parser):
    parser.add_argument("--release-extraction", action="store_true",
                        help="measure a release's two streams from one decode against one decode per stream")
    parser.add_argument("--release-preset", default="qvhighlights", help="--release-extraction: the release")
    parser.add_argument("--release-videos", nargs="+", metavar="FILE",
                        help="--release-extraction: these video files (default: --extract-videos rendered ones)")
    parser.add_argument("--release-only", action="store_true",
                        help="--release-extraction: one decode for both streams only (no baseline)")
    parser.add_argument("--clip-model", default="", metavar="PATH",
                        help="--release-extraction: openai's ViT-B-32.pt (default: a tiny random one)")
    parser.add_argument("--slowfast-model", default="", metavar="FILE",
                        help="--release-extraction: SLOWFAST_8x8_R50.pkl (default: a tiny random one)")
    parser.add_argument("--release-resolution", type=int, default=224,
                        help="--release-extraction: SlowFast's frame size (default 224)")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config-file", default=None, metavar="FILE",
                        help="config whose shapes are measured (default: the TACoS reference setting; for "
                             "--long-videos, the synthetic quick start's model)")
    parser.add_argument("--preset", choices=sorted(PRESETS), help="overrides applied before KEY VALUE ones")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                        help="cpu, cuda or cuda:N (default: cuda when present)")
    parser.add_argument("--impl", choices=("both", "ours", "reference"), default="both",
                        help="which implementation(s) to measure (default: both, side by side)")
    parser.add_argument("--batch", type=int, default=None,
                        help="batch size (default: SOLVER.BATCH_SIZE; queries for 2D-TAN and MS-2D-TAN, videos for MMN)")
    parser.add_argument("--sentences-per-video", type=int, default=8,
                        help="MMN only: sentences of each video of a batch (default 8)")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per workload (default 10)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    parser.add_argument("--only", type=_workloads, default=list(WORKLOADS), metavar="LIST",
                        help=f"comma-separated workloads to measure, of {','.join(WORKLOADS)} (default: all)")
    parser.add_argument("--eval-queries", type=int, default=4001,
                        help="queries of the evaluation workload (default 4001, the TACoS test split)")
    parser.add_argument("--reference-eval-queries", type=int, default=200,
                        help="queries for the baseline's per-query loop (it is slow; the figure is per query)")
    parser.add_argument("--data-batches", type=int, default=50, help="batches read for the data-loading figure")
    parser.add_argument("--sweep-n", type=sweep.parse_sizes, metavar="LIST",
                        help="measure training (speed and memory) at each N of LIST (e.g. 64,128,256,512) instead, "
                             "pooling counts extending TACoS's (tools/benchmarking/sweep.py)")
    parser.add_argument("--plot", metavar="PNG", help="with --sweep-n: also draw the sweep (needs matplotlib)")
    parser.add_argument("--extraction", action="store_true",
                        help="measure feature extraction from video files instead (see below)")
    parser.add_argument("--extract-backbone", default="clip", help="--extraction: the backbone (default clip)")
    parser.add_argument("--extract-model", default="", metavar="NAME",
                        help="--extraction: model folder or hub name (default: a tiny random one)")
    parser.add_argument("--extract-videos", type=int, default=8, help="--extraction: videos (default 8)")
    parser.add_argument("--extract-seconds", type=float, default=60.0, help="--extraction: their length (default 60)")
    parser.add_argument("--extract-size", type=_frame_size, default=(240, 320), metavar="WxH",
                        help="--extraction: their frame size (default 320x240)")
    parser.add_argument("--extract-fps", type=float, default=30.0, help="--extraction: their frame rate (default 30)")
    parser.add_argument("--extract-clip-seconds", type=float, default=2.0,
                        help="--extraction: seconds per clip (default 2)")
    parser.add_argument("--workers", type=int, default=2, help="--extraction: decoding workers (default 2)")
    parser.add_argument("--saved-memory", action="store_true",
                        help="2D-TAN: what a training step keeps for its backward and its peak growth, in fresh "
                             "processes (CPU), beside --reference-code's")
    parser.add_argument("--reference-code", metavar="PATH",
                        help="--saved-memory: a checkout of chenjoya/2dtan, whose own code is measured too")
    parser.add_argument("--long-videos", action="store_true",
                        help="long videos scored whole, by every window and by a relevance stage's top windows: "
                             "queries per second and peak memory per video length, in fresh processes")
    parser.add_argument("--lengths", type=_seconds_list, default=list(long_videos.DEFAULT_SECONDS),
                        metavar="S,S,...", help="--long-videos: the videos' lengths in seconds (default 600,3600,7200)")
    parser.add_argument("--window-length", type=float, default=60.0, metavar="SECONDS",
                        help="--long-videos: TEST.WINDOW.LENGTH (the model has random weights, so no trained span; "
                             "default 60)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON to PATH ('-' for stdout)")
    add_release_arguments(parser)
    parser.add_argument("opts", nargs=argparse.REMAINDER, metavar="KEY VALUE", help="config overrides")
    args = parser.parse_args(argv)
    if args.config_file is None:
        args.config_file = SYNTHETIC if args.long_videos else TACOS
    return args


def measure(cfg, impl, device, args):
    batch_size = args.batch or cfg.SOLVER.BATCH_SIZE
    timer = W.Timer(device, args.warmup, args.steps)
    out = {}
    architecture = cfg.MODEL.ARCHITECTURE
    if impl == "reference" and device.type == "cuda":
        torch.backends.cudnn.benchmark = architecture == "MS_TAN"  # its experiment files' CUDNN.BENCHMARK
        torch.backends.cudnn.allow_tf32 = True
        torch.backends.cuda.matmul.allow_tf32 = False
    elif impl == "ours":
        configure_backends(cfg, device)
    mmn = architecture == "MMN"
    # the model's workloads; data loading is shared, and so is the evaluation except for MS_TAN
    steps = {"MMN": M, "MS_TAN": MS}.get(architecture, W)
    need_model = {"train", "memory", "inference", "predictor"} & set(args.only)
    model = steps.build(cfg, impl, device) if need_model else None
    if mmn:
        batch = M.random_video_batch(cfg, batch_size, args.sentences_per_video, device)
    elif steps is MS:
        batch = MS.random_batches(cfg, batch_size, device) if need_model else None
    else:
        batch = W.random_batch(cfg, batch_size, device)
    if "train" in args.only:
        seconds = timer(steps.train_step_fn(cfg, impl, model, batch, device))
        out["train_samples_per_s"] = batch_size / seconds
        out["train_peak_memory_gb"] = W.peak_memory_gb(device)
        model = steps.build(cfg, impl, device)  # fresh weights for the next workloads
    if "memory" in args.only and steps is not MS:
        out.update(measure_memory(steps.train_step_fn(cfg, impl, model, batch, device), model, batch_size, device))
        model = steps.build(cfg, impl, device)
    if "inference" in args.only:
        seconds = timer(steps.inference_step_fn(cfg, impl, model, batch, device))
        out["inference_samples_per_s"] = batch_size / seconds
        out["inference_peak_memory_gb"] = W.peak_memory_gb(device)
    if "predictor" in args.only and steps is W:  # TAN's predictor alone
        model.train()
        seconds = timer(W.predictor_step_fn(cfg, impl, model, batch_size, device))
        dense, computed = W.predictor_flops(cfg if impl == "ours" else _dense(cfg))
        out["predictor_train_samples_per_s"] = batch_size / seconds
        out["predictor_dense_tflop_per_sample"] = 3 * dense / 1e12  # forward + backward
        out["predictor_achieved_tflops"] = 3 * computed * batch_size / seconds / 1e12
        out["predictor_dense_equivalent_tflops"] = 3 * dense * batch_size / seconds / 1e12
    del model
    if "eval" in args.only:
        queries = args.reference_eval_queries if impl == "reference" else args.eval_queries
        per_query, _ = (MS if steps is MS else W).time_evaluation(cfg, impl, queries, device)
        out["eval_ms_per_query"] = per_query * 1e3
        out["eval_seconds_total"] = per_query * args.eval_queries
    if "data" in args.only and impl == "ours":
        try:
            data = RunData(cfg)
            data.check_files()
            out["data_samples_per_s"] = W.time_data_loading(data, args.data_batches, by_video=mmn)
        except TanError as e:
            out["data_samples_per_s"] = None
            out["data_skipped"] = str(e).splitlines()[0]
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return out


def measure_memory(step, model, batch_size, device):
    """Activation memory per sample of a training step (after one untimed step: the
    optimizer's state exists), from the allocator's records (benchmarking/memory.py).
    The parameters' gradients are dropped first, so that the step's own freeing of
    them (between forward and backward) cannot count against what it keeps on an
    allocator that reports frees of blocks from before the profile (the CPU's
    reports none); on every device, the step's new gradients count in its peak."""
    step()
    model.zero_grad(set_to_none=True)
    kept, peak = step_memory(step, device)
    per_sample = (lambda b: b / batch_size / 1e9 if b is not None else None)
    return {"train_activation_gb_per_sample": per_sample(kept), "train_peak_growth_gb_per_sample": per_sample(peak)}


def _dense(cfg):
    cfg = cfg.clone()
    cfg.defrost()
    cfg.MODEL.TAN.PREDICTOR.STRIP_ROWS = 0
    return cfg


def describe_model(cfg):
    """The report's line about the model's shape."""
    if cfg.MODEL.ARCHITECTURE == "MS_TAN":
        return MS.describe(cfg)
    return f"2D map {cfg.MODEL[cfg.MODEL.ARCHITECTURE].FEAT2D.NAME}"


def describe_machine(device):
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    allocator = "keeps freed memory" if keeps_freed_memory() else "the C library's default"
    return f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, allocator {allocator}"


ROWS = [("train_samples_per_s", "train samples/s", "{:.1f}"), ("train_peak_memory_gb", "train peak memory GB", "{:.2f}"),
        ("train_activation_gb_per_sample", "train activations kept GB/sample", "{:.3f}"),
        ("train_peak_growth_gb_per_sample", "train step peak growth GB/sample", "{:.3f}"),
        ("inference_samples_per_s", "inference samples/s", "{:.1f}"),
        ("inference_peak_memory_gb", "inference peak memory GB", "{:.2f}"),
        ("predictor_train_samples_per_s", "predictor fwd+bwd samples/s", "{:.1f}"),
        ("predictor_achieved_tflops", "predictor achieved TFLOP/s", "{:.2f}"),
        ("predictor_dense_equivalent_tflops", "predictor dense-equivalent TFLOP/s", "{:.2f}"),
        ("eval_ms_per_query", "evaluation ms/query", "{:.4f}"),
        ("eval_seconds_total", "evaluation s for all queries", "{:.3f}"),
        ("data_samples_per_s", "data loading samples/s", "{:.1f}")]


def format_report(report):
    impls = list(report["results"])
    unit = (f"videos x {report['sentences_per_video']} sentences" if report.get("sentences_per_video")
            else "queries")
    model = report.get("model") or f"2D map {report.get('feat2d', 'pool')}"
    strips = f", strip rows {report['strip_rows']}" if report.get("strip_rows") is not None else ""
    lines = [f"model: {report.get('architecture', 'TAN')}, {model}",
             f"device: {report['device']} ({report['machine']}), torch {report['torch']}, batch {report['batch']} "
             f"{unit} (samples: {unit.split()[0]}), AMP {report['amp']}{strips}, compile {report['compile']}",
             f"{'':38}" + "".join(f"{name:>14}" for name in impls) + ("      speed-up" if len(impls) == 2 else "")]
    for key, label, fmt in ROWS:
        values = [report["results"][i].get(key) for i in impls]
        if all(v is None for v in values):
            continue
        cells = "".join(f"{(fmt.format(v) if v is not None else '-'):>14}" for v in values)
        ratio = ""
        if len(impls) == 2 and None not in values and values[1]:
            lower_is_better = "memory" in key or "eval_" in key or "_gb_per_sample" in key
            r = values[1] / values[0] if lower_is_better else values[0] / values[1]
            ratio = f"{r:>13.2f}x"
        lines.append(f"{label:38}{cells}{ratio}")
    if "eval_seconds_total" in report["results"].get(impls[0], {}):
        baseline = "the baseline" if report.get("architecture") == "MS_TAN" else "the baseline's per-query loop"
        lines.append(f"(evaluation: {report['eval_queries']} queries; {baseline} is timed on "
                     f"{report['reference_eval_queries']} and scaled)")
    skipped = report["results"].get("ours", {}).get("data_skipped")
    if skipped:
        lines.append(f"data loading not measured: {skipped}")
    lines += [textwrap.fill(note, 118, initial_indent="note: ", subsequent_indent="  ")
              for note in report.get("notes", ())]
    return "\n".join(lines)


def _frame_size(text):
    width, _, height = text.lower().partition("x")
    if not (width.isdigit() and height.isdigit() and int(width) > 0 and int(height) > 0):
        raise argparse.ArgumentTypeError(f"{text!r}: expected WIDTHxHEIGHT, e.g. 320x240")
    return int(height), int(width)


def run_extraction(args, device):
    report = {"device": str(device), "machine": describe_machine(device), "torch": torch.__version__,
              **extraction.measure_extraction(args, device)}
    print(extraction.format_extraction(report))
    write_json(args.json, report)


def run_release_extraction(args, device):
    report = {"device": str(device), "machine": describe_machine(device), "torch": torch.__version__,
              **release_extraction.measure_release_extraction(args, device)}
    print(release_extraction.format_release_extraction(report))
    write_json(args.json, report)


def run_saved_memory(args):
    batch = args.batch or 2
    report = {"config": os.path.relpath(args.config_file), "overrides": list(args.opts), "batch": batch,
              "machine": describe_machine(torch.device("cpu")), "torch": torch.__version__, "results": {}}
    if args.reference_code:
        if not os.path.isfile(os.path.join(args.reference_code, saved_memory.REFERENCE_CONFIG)):
            raise TanError(f"--reference-code {args.reference_code!r}: expected a checkout of chenjoya/2dtan, with "
                           f"{saved_memory.REFERENCE_CONFIG}")
        report["results"]["chenjoya/2dtan"] = saved_memory.in_fresh_process(
            "chenjoya", batch, reference_code=args.reference_code)
        print("measured chenjoya/2dtan", file=sys.stderr, flush=True)
    report["results"]["tan"] = saved_memory.in_fresh_process("tan", batch, config_file=args.config_file,
                                                             opts=args.opts)
    print(saved_memory.format_report(report))
    write_json(args.json, report)


def run_long_videos(args):
    cfg = load_config(args.config_file, args.opts)
    device = str(args.device)
    report = {"config": os.path.relpath(args.config_file), "overrides": list(args.opts), "device": device,
              "machine": describe_machine(torch.device(device)), "torch": torch.__version__,
              "window_length": args.window_length, "window_batch": cfg.TEST.WINDOW.BATCH, "top_k": cfg.TEST.WINDOW.TOP_K,
              "lengths": [int(s) if float(s).is_integer() else s for s in args.lengths], "results": {}}
    for seconds in report["lengths"]:
        for way in long_videos.WAYS:
            report["results"][f"{seconds}/{way}"] = long_videos.in_fresh_process(
                args.config_file, seconds, way, args.window_length, device, args.opts)
            print(f"measured a {seconds} s video, {way}", file=sys.stderr, flush=True)
    print(long_videos.format_report(report))
    write_json(args.json, report)


def main(argv=None):
    args = parse_args(argv)
    if args.long_videos:
        return run_long_videos(args)
    if args.extraction:
        return run_extraction(args, torch.device(args.device))
    if args.release_extraction:
        return run_release_extraction(args, torch.device(args.device))
    if args.saved_memory:
        return run_saved_memory(args)
    architecture = load_config(args.config_file, args.opts).MODEL.ARCHITECTURE
    opts = merge_overrides(preset_overrides(args.preset, architecture), args.opts)  # the user's keys win
    cfg = load_config(args.config_file, opts)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise TanError(f"--device {args.device}: CUDA is not available on this machine")
    if amp_is_emulated(cfg.SOLVER.AMP, device):
        print(f"warning: {slow_amp_warning(cfg.SOLVER.AMP)}", file=sys.stderr, flush=True)
    if device.type == "cpu" and cfg.CPU_KEEP_FREED_MEMORY:
        keep_freed_memory()  # process-wide, so for both implementations alike
    impls = ["ours", "reference"] if args.impl == "both" else [args.impl]
    if args.sweep_n:
        return run_sweep(args, opts, cfg, impls, device)
    ms_tan = cfg.MODEL.ARCHITECTURE == "MS_TAN"
    report = {"config": os.path.relpath(args.config_file), "preset": args.preset, "overrides": list(args.opts),
              "device": str(device), "machine": describe_machine(device), "torch": torch.__version__,
              "architecture": cfg.MODEL.ARCHITECTURE, "model": describe_model(cfg),
              "feat2d": None if ms_tan else cfg.MODEL[cfg.MODEL.ARCHITECTURE].FEAT2D.NAME,
              "sentences_per_video": args.sentences_per_video if cfg.MODEL.ARCHITECTURE == "MMN" else None,
              "batch": args.batch or cfg.SOLVER.BATCH_SIZE, "amp": cfg.SOLVER.AMP,
              "strip_rows": None if ms_tan else cfg.MODEL[cfg.MODEL.ARCHITECTURE].PREDICTOR.STRIP_ROWS,
              "compile": cfg.SOLVER.COMPILE,
              "channels_last": cfg.MODEL.CHANNELS_LAST, "steps": args.steps, "eval_queries": args.eval_queries,
              "reference_eval_queries": args.reference_eval_queries, "notes": list(MS.NOTES) if ms_tan else [],
              "results": {}}
    for impl in impls:
        report["results"][impl] = measure(cfg, impl, device, args)
        print(f"measured {impl}", file=sys.stderr, flush=True)
    print(format_report(report))
    write_json(args.json, report)


def write_json(path, report):
    if path == "-":
        print(json.dumps(report, indent=2))
    elif path:
        atomic_write_text(path, json.dumps(report, indent=2) + "\n")


def run_sweep(args, opts, cfg, impls, device):
    """--sweep-n: training speed and memory at each N, ours beside the baseline."""
    args.only = ["train", "memory"]
    report = {"config": os.path.relpath(args.config_file), "preset": args.preset, "overrides": list(args.opts),
              "architecture": cfg.MODEL.ARCHITECTURE, "device": str(device), "machine": describe_machine(device),
              "torch": torch.__version__, "batch": args.batch or cfg.SOLVER.BATCH_SIZE, "amp": cfg.SOLVER.AMP,
              "steps": args.steps, "impls": impls, "points": []}
    for n in args.sweep_n:
        cfg_n = load_config(args.config_file, merge_overrides(opts, sweep.sweep_overrides(cfg, n)))
        point = {"n": n, "pooling_counts": sweep.long_video_counts(n), "results": {}}
        for impl in impls:
            point["results"][impl] = measure(cfg_n, impl, device, args)
            print(f"measured {impl} at N {n}", file=sys.stderr, flush=True)
        report["points"].append(point)
    print(sweep.format_sweep(report))
    write_json(args.json, report)
    if args.plot:
        sweep.plot_sweep(report, args.plot)


if __name__ == "__main__":
    run_cli(main)
