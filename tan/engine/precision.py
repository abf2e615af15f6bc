"""Numeric precision and backend switches: autocast, gradient scaling, TF32, cuDNN autotuning."""
import contextlib

import torch

from ..errors import TanError

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


# CPU flags of the instructions that compute in each autocast dtype (Linux /proc/cpuinfo names).
NATIVE_CPU_FLAGS = {"bf16": ("avx512_bf16", "amx_bf16"), "fp16": ("avx512_fp16", "amx_fp16")}


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
    """True for bf16 or fp16 autocast on a CPU known to lack that dtype's instructions:
    there it is emulated and runs many times slower than float32 (bf16: 9 to 23 times,
    measured on an AVX2-only CPU). ``flags``: the CPU's, read from /proc/cpuinfo when None."""
    if amp not in NATIVE_CPU_FLAGS or device.type != "cpu":
        return False
    flags = cpu_flags() if flags is None else flags
    return flags is not None and not flags & set(NATIVE_CPU_FLAGS[amp])


def slow_amp_warning(amp):
    """What to expect from an emulated SOLVER.AMP mode on this CPU, and what to use instead."""
    name = {"bf16": "bfloat16", "fp16": "float16"}[amp]
    instead = "SOLVER.AMP off is faster on this machine"
    if amp == "fp16":
        instead += " (or bf16 on a CPU with avx512_bf16 or amx_bf16)"
    return (f"SOLVER.AMP {amp} on a CPU without {name} instructions (none of {', '.join(NATIVE_CPU_FLAGS[amp])}): "
            f"{name} is emulated and runs many times slower than float32 here; {instead}")


def configure_backends(cfg, device):
    """cuDNN autotuning and TF32 as the config asks (they only matter on CUDA)."""
    if device.type != "cuda":
        return
    torch.backends.cudnn.benchmark = bool(cfg.CUDNN_BENCHMARK)
    torch.backends.cudnn.allow_tf32 = bool(cfg.TF32)
    torch.backends.cuda.matmul.allow_tf32 = bool(cfg.TF32)
