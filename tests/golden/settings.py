"""The golden setup, shared by tests/test_golden.py and tests/golden/regenerate.py,
and the helpers both use to run the tools and to reduce their outputs to
comparable fixtures.

Change nothing here without regenerating the fixtures (see regenerate.py).
"""
import hashlib
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile

from runs import stop_process_group, wait_for_training_record
from tan.config.setup import merge_overrides

GOLDEN_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(GOLDEN_DIR))
CONFIG = os.path.join(REPO, "configs", "2dtan_synthetic.yaml")

# The golden run: the built-in synthetic config, shrunk to a short, fixed-seed
# CPU run (3 epochs of 8 iterations, the LR dropping after epoch 2, validation
# and a checkpoint every epoch, a small model). SEED stays the config's 0.
OVERRIDES = [
    "MODEL.DEVICE", "cpu",
    "DATALOADER.NUM_WORKERS", "0",
    "SOLVER.AMP", "off",
    "SOLVER.LR", "0.01",  # the config's 0.001 hardly moves the loss in 24 iterations
    "SOLVER.MAX_EPOCH", "3",
    "SOLVER.ITERS_PER_EPOCH", "8",
    "SOLVER.TEST_PERIOD", "1",
    "SOLVER.CHECKPOINT_PERIOD", "1",
    "SOLVER.MILESTONES", "(2,)",
    "SOLVER.LOG_PERIOD", "4",
    "MODEL.TAN.FEATPOOL.HIDDEN_SIZE", "16",
    "MODEL.TAN.INTEGRATOR.QUERY_HIDDEN_SIZE", "16",
    "MODEL.TAN.PREDICTOR.HIDDEN_SIZE", "16",
]
# Resume exactness with everything on: loader workers, bf16 autocast, and a
# metrics.jsonl record every iteration (to interrupt at a known point). The
# periodic evaluation (and with it model_best.pth) is already on in OVERRIDES.
# At the config's LR and with the best model picked on R@1,IoU@0.1, validation
# peaks at epoch 1 on the recording machine, before the interruption in epoch
# 2, so a resume that lost the best so far would keep another model_best.pth
# (the test warns where this machine's run cannot tell).
RESUME_OVERRIDES = merge_overrides(OVERRIDES, [
    "DATALOADER.NUM_WORKERS", "1",
    "SOLVER.AMP", "bf16",
    "SOLVER.LOG_PERIOD", "1",
    "SOLVER.LR", "0.001",
    "TEST.BEST_METRIC", "R@1,IoU@0.1",
])
# The regeneration run that leaves resume_from.pth: SIGTERM once metrics.jsonl
# has a record of this epoch at or past this iteration (OVERRIDES log every 4).
RESUME_FROM_AT = (2, 4)
# The resume test: SIGTERM once a record of epoch 2 at iteration >= 2 appears.
INTERRUPT_AT = (2, 2)

TEST_DATASET = "synthetic_test"
# Fields of metrics.jsonl records that measure time, not behaviour.
TIMING_FIELDS = ("time", "data_time", "eta_seconds", "max_mem_mb")

# Logits of a fixed model on a fixed input: build_model after manual_seed(0),
# then an input drawn from a generator seeded with LOGITS_INPUT_SEED.
LOGITS_MODEL_SEED = 0
LOGITS_INPUT_SEED = 1234
LOGITS_WORDLENS = (7, 4)  # two queries, the second padded

# Tolerances used only where the fixtures come from another machine class
# (torch version or CPU instruction set); on the recording one, all is exact.
WEIGHTS_RTOL, WEIGHTS_ATOL = 1e-2, 1e-3
LOGITS_RTOL, LOGITS_ATOL = 1e-3, 1e-4
LOSS_RTOL = 1e-3
METRIC_POINTS = 1.0  # recall / mIoU figures, in points (percent)

FILES = {
    "machine": os.path.join(GOLDEN_DIR, "machine.json"),
    "weights": os.path.join(GOLDEN_DIR, "weights.json"),
    "metrics": os.path.join(GOLDEN_DIR, "metrics.json"),
    "predictions": os.path.join(GOLDEN_DIR, "predictions.jsonl"),
    "records": os.path.join(GOLDEN_DIR, "records.json"),
    "logits": os.path.join(GOLDEN_DIR, "logits.pt"),
    "model_final": os.path.join(GOLDEN_DIR, "model_final.pth"),
    "resume_from": os.path.join(GOLDEN_DIR, "resume_from.pth"),
}


# ---------------------------------------------------------------- running the tools

def tool_env():
    """One thread per process, no GPU, unbuffered: results independent of the core count."""
    return dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="",
                PYTHONUNBUFFERED="1")


def tool_command(tool, *args):
    return [sys.executable, os.path.join(REPO, "tools", f"{tool}.py"), *args]


def train_args(root, out, *extra, overrides=OVERRIDES):
    flags = [a for a in extra if a.startswith("--")]  # a tool refuses a key given twice: extra's keys replace
    return ["--config-file", CONFIG, *flags, *merge_overrides(["DATASETS.ROOT", str(root), "OUTPUT_DIR", str(out),
                                                             *overrides], [a for a in extra if a not in flags])]


def run_tool(tool, *args, timeout=600):
    """tools/<tool>.py in a fresh interpreter; the CompletedProcess (output merged into stdout)."""
    return subprocess.run(tool_command(tool, *args), env=tool_env(), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout)


def run_interrupted(tool, args, metrics_path, at, timeout=300):
    """Start tools/<tool>.py, send SIGTERM once ``metrics_path`` holds a training
    record of epoch ``at[0]`` with iter >= ``at[1]``, and wait for it to end.
    Returns (returncode, output, sent). Watches the file, not the log wording."""
    with tempfile.TemporaryFile("w+") as log:  # a file, so that a full pipe never blocks the run
        proc = subprocess.Popen(tool_command(tool, *args), env=tool_env(), stdout=log, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
        sent = False
        try:
            try:
                wait_for_training_record(os.path.dirname(metrics_path), proc, *at, timeout=timeout)
                proc.send_signal(signal.SIGTERM)
                sent = True
            except AssertionError:  # it ended, or the time ran out, before that point: ``sent`` says so
                pass
            proc.wait(timeout=timeout)
        finally:
            stop_process_group(proc)
        log.seek(0)
        return proc.returncode, log.read(), sent


# ---------------------------------------------------------------- reducing outputs to fixtures

def read_jsonl(path):
    """Complete lines of a JSON-lines file ([] if it does not exist yet)."""
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        return []
    lines = text.split("\n")
    if not text.endswith("\n"):
        lines = lines[:-1]  # a line being written
    return [json.loads(line) for line in lines if line.strip()]


def records_of(out):
    """metrics.jsonl of a run without its timing fields: (training records, validation records)."""
    records = [{k: v for k, v in r.items() if k not in TIMING_FIELDS}
               for r in read_jsonl(os.path.join(out, "metrics.jsonl"))]
    return [r for r in records if "dataset" not in r], [r for r in records if "dataset" in r]


def last_per_epoch(validation):
    """The last validation record per (epoch, dataset), in (epoch, dataset) order."""
    last = {(r["epoch"], r["dataset"]): r for r in validation}
    return [last[key] for key in sorted(last)]


def read_test_metrics(out, checkpoint="model_final"):
    """OUTPUT_DIR/inference/{checkpoint}/synthetic_test/metrics.json without the (temporary) checkpoint path."""
    with open(os.path.join(out, "inference", checkpoint, TEST_DATASET, "metrics.json")) as f:
        metrics = json.load(f)
    metrics.pop("checkpoint", None)
    return metrics


def predictions_path(out, checkpoint="model_final"):
    return os.path.join(out, "inference", checkpoint, TEST_DATASET, "predictions.jsonl")


def tensor_digest(tensor):
    import torch

    t = tensor.detach().cpu().contiguous()
    data = t.reshape(-1).view(torch.uint8).numpy().tobytes()
    return {"dtype": str(t.dtype), "shape": list(t.shape), "sha256": hashlib.sha256(data).hexdigest()}


def load_checkpoint(path):
    import torch

    return torch.load(path, map_location="cpu", weights_only=False)


def weight_digests(state):
    return {name: tensor_digest(value) for name, value in state.items()}


# CPU features that change which kernels oneDNN / ATen pick (and so the rounding).
KERNEL_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16")


def machine_info():
    """What must match for the exact comparison: torch, ATen's CPU capability,
    the CPU model and its kernel-relevant instruction sets."""
    import torch

    return {"torch": torch.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "cpu_model": _cpu_model(), "cpu_flags": _kernel_flags()}


def _kernel_flags():
    from tan.engine.precision import cpu_flags

    present = cpu_flags() or set()
    return [flag for flag in KERNEL_FLAGS if flag in present]


def machine_description():
    """Not compared; says where the fixtures were written."""
    return {"python": platform.python_version(), "machine": platform.machine(), "processor": _cpu_model()}


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def fixed_logits():
    """Logits of the golden-config model (built after manual_seed) on a seeded
    input, in eval mode, on one CPU thread. Public API only."""
    import torch

    from tan.config import load_config
    from tan.modeling import build_model

    cfg = load_config(CONFIG, OVERRIDES)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(LOGITS_MODEL_SEED)
        model = build_model(cfg).eval()
        gen = torch.Generator().manual_seed(LOGITS_INPUT_SEED)
        batch, length = len(LOGITS_WORDLENS), max(LOGITS_WORDLENS)
        feats = torch.randn(batch, cfg.INPUT.NUM_PRE_CLIPS, cfg.MODEL.TAN.FEATPOOL.INPUT_SIZE, generator=gen)
        queries = torch.randn(batch, length, cfg.INPUT.PRE_QUERY_SIZE, generator=gen)
        wordlens = torch.tensor(LOGITS_WORDLENS, dtype=torch.long)
        for row, n in enumerate(LOGITS_WORDLENS):
            queries[row, n:] = 0  # padding, as the collator makes it
        with torch.no_grad():
            return model(feats, queries, wordlens)
    finally:
        torch.set_num_threads(threads)
