"""Numeric precision and backend switches: autocast, gradient scaling, TF32, cuDNN autotuning, the CPU's
allocator."""
import contextlib
import logging

import torch

from ..errors import TanError
from .cpu_allocator import keep_freed_memory, keeps_freed_memory

# SOLVER.AMP -> autocast dtype, for every mode of tan.config.choices.AMP_MODES but "off".
AUTOCAST_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def autocast(amp, device):
    """Mixed-precision region for SOLVER.AMP; a no-op when it is "off"."""
    if amp == "off":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=AUTOCAST_DTYPES[amp])


def make_grad_scaler(amp, device):
    """fp16 needs loss scaling to keep small gradients from underflowing; bf16
    has float32's range and does not. A disabled scaler passes through."""
    return torch.amp.GradScaler(device.type, enabled=amp == "fp16")


# CPU flags of the instructions that compute in bfloat16 (Linux /proc/cpuinfo names).
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")


def cpu_flags(cpuinfo="/proc/cpuinfo"):
    """The CPU's feature flags, or None where they cannot be read (not Linux)."""
    try:
        with open(cpuinfo) as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        return None
    return None


def check_amp_support(amp, device):
    """bf16 on a GPU without bfloat16 is an error before any work."""
    if amp == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise TanError(f"SOLVER.AMP bf16: GPU {torch.cuda.get_device_name(device)} has no bfloat16 support; "
                       f"use SOLVER.AMP fp16 or off")


def amp_is_emulated(amp, device, flags=None):
    """True where SOLVER.AMP runs many times slower than float32 on the CPU: bf16 on a CPU
    known to lack bfloat16 instructions (9 to 23 times, measured on an AVX2-only CPU), and
    fp16 on any CPU (the CPU kernels have no fast float16 path: a training step on the
    cpu-small setting took over 100 times longer than float32 on a CPU with AVX512-FP16).
    ``flags``: the CPU's, read from /proc/cpuinfo when None."""
    if device.type != "cpu":
        return False
    if amp == "fp16":
        return True
    if amp != "bf16":
        return False
    flags = cpu_flags() if flags is None else flags
    return flags is not None and not flags & set(BF16_CPU_FLAGS)


def slow_amp_warning(amp):
    """What to expect from a slow SOLVER.AMP mode on this CPU, and what to use instead."""
    if amp == "fp16":
        return ("SOLVER.AMP fp16 on the CPU: float16 has no fast CPU kernels and runs many times slower than "
                "float32 (over 100 times in training, even with AVX512-FP16); SOLVER.AMP off is faster, or bf16 "
                f"on a CPU with bfloat16 instructions ({', '.join(BF16_CPU_FLAGS)})")
    return (f"SOLVER.AMP bf16 on a CPU without bfloat16 instructions (none of {', '.join(BF16_CPU_FLAGS)}): "
            f"bfloat16 is emulated and runs many times slower than float32 here; SOLVER.AMP off is faster on "
            f"this machine")


def prepare_backends(cfg, device):
    """SOLVER.AMP checked against the device, then the backends set (:func:`configure_backends`)."""
    check_amp_support(cfg.SOLVER.AMP, device)
    configure_backends(cfg, device)


def backend_warnings(cfg, device):
    """(logging level, message) for what the run's precision and allocator settings cannot do here:
    a SOLVER.AMP that is emulated on this CPU, a C library whose allocator cannot keep freed memory."""
    found = []
    if amp_is_emulated(cfg.SOLVER.AMP, device):
        found.append((logging.WARNING, slow_amp_warning(cfg.SOLVER.AMP)))
    if device.type == "cpu" and cfg.CPU_KEEP_FREED_MEMORY and not keeps_freed_memory():
        found.append((logging.INFO, "CPU_KEEP_FREED_MEMORY: the C library's allocator cannot be set here (it is not "
                                    "glibc's, or mallopt refused); it is left as it is"))
    return found


def configure_backends(cfg, device):
    """cuDNN autotuning and TF32 as the config asks (they only matter on CUDA); on the CPU,
    the allocator keeping freed memory for the next step (:mod:`tan.engine.cpu_allocator`)."""
    if device.type == "cpu" and cfg.CPU_KEEP_FREED_MEMORY:
        keep_freed_memory()
    if device.type != "cuda":
        return
    torch.backends.cudnn.benchmark = bool(cfg.CUDNN_BENCHMARK)
    torch.backends.cudnn.allow_tf32 = bool(cfg.TF32)
    torch.backends.cuda.matmul.allow_tf32 = bool(cfg.TF32)
