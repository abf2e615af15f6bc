"""Numeric precision and backend switches: autocast, gradient scaling, TF32, cuDNN autotuning."""
import contextlib

import torch

AMP_MODES = ("off", "fp16", "bf16")
_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def autocast(amp, device):
    """Mixed-precision region for SOLVER.AMP; a no-op when it is "off"."""
    if amp == "off":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=_DTYPES[amp])


def make_grad_scaler(amp, device):
    """fp16 needs loss scaling to keep small gradients from underflowing; bf16
    has float32's range and does not. A disabled scaler passes through."""
    return torch.amp.GradScaler(device.type, enabled=amp == "fp16")


def configure_backends(cfg, device):
    """cuDNN autotuning and TF32 as the config asks (they only matter on CUDA)."""
    if device.type != "cuda":
        return
    torch.backends.cudnn.benchmark = bool(cfg.CUDNN_BENCHMARK)
    torch.backends.cudnn.allow_tf32 = bool(cfg.TF32)
    torch.backends.cuda.matmul.allow_tf32 = bool(cfg.TF32)


def prepare_model(cfg, model, device):
    """Memory format for the 2D convolutions (model already on ``device``)."""
    if cfg.MODEL.CHANNELS_LAST:
        model.to(memory_format=torch.channels_last)
    return model


def maybe_compile(cfg, model):
    """torch.compile around the (possibly distributed) model when SOLVER.COMPILE is on."""
    if not cfg.SOLVER.COMPILE:
        return model
    return torch.compile(model)
