#!/usr/bin/env python
"""Check that the model gives the same scores on CUDA as on CPU, that 2D-TAN's
training on bands gives, on CUDA, the same loss and gradients bit for bit when
its backward computes the fused first band again as when it keeps it, and time
a few training steps at a config's real shapes on random inputs.

Example:
  python tools/cuda_smoke.py --config-file configs/2dtan_128x128_pool_k5l8_tacos.yaml --batch 32
"""
import argparse
import json
import time

import checkout_path  # noqa: F401  (this checkout's tan first on sys.path)
import torch

from benchmarking.workloads import random_batch
from tan_apps.cli.exit_codes import run_cli
from tan.config import load_config
from tan.config.models import model_class
from tan.engine.precision import make_grad_scaler
from tan.engine.step import forward_batch, move_batch, run_step
from tan.errors import TanError
from tan.modeling import build_model
from tan.solver import build_optimizer


def first_band_check(cfg, device, batch):
    """On ``device``, with deterministic cuDNN: whether a training step whose backward computes
    the fused first band again (2D-TAN on bands, the default) gives the loss and every gradient
    of a step that keeps that band, bit for bit, in float32 and under bf16 autocast
    ({"float32": bool, "bf16": bool}); None for a config that does not train on bands."""
    import tan.modeling.tan2d.model as tan2d

    if cfg.MODEL.ARCHITECTURE != "TAN" or cfg.MODEL.TAN.PREDICTOR.STRIP_ROWS == 0:
        return None
    torch.manual_seed(cfg.SEED)
    model = build_model(cfg).to(device).train()
    moved = move_batch(batch, device)

    def step(amp):
        model.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
            loss = sum(model.losses(forward_batch(model, moved), moved).values())
        loss.backward()
        return [loss.detach()] + [p.grad.clone() for p in model.parameters() if p.grad is not None]

    result = {}
    deterministic, recipe = torch.backends.cudnn.deterministic, tan2d.fused_band_recipe
    torch.backends.cudnn.deterministic = True
    try:  # the timed steps that follow run with cuDNN as a user runs it, whatever happens here
        for name, amp in (("float32", False), ("bf16", True)):
            again = step(amp)
            tan2d.fused_band_recipe = lambda *inputs: None  # no recipe: the first layer keeps the band
            try:
                kept = step(amp)
            finally:
                tan2d.fused_band_recipe = recipe
            result[name] = len(again) == len(kept) and all(torch.equal(a, b) for a, b in zip(again, kept))
    finally:
        torch.backends.cudnn.deterministic = deterministic
    return result


def build_parser():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config-file", required=True)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--device", default="cuda", help="device to compare with the CPU and to time on")
    parser.add_argument("opts", nargs=argparse.REMAINDER)
    return parser


def main():
    args = build_parser().parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise TanError(f"--device {args.device}: CUDA is not available on this machine")
    cuda = device.type == "cuda"
    cfg = load_config(args.config_file, args.opts)
    torch.backends.cudnn.allow_tf32 = False  # compare in true float32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(cfg.SEED)
    model = build_model(cfg).eval()
    small = random_batch(cfg, 4, torch.device("cpu"), seed=0)
    feats, queries, wordlens = small["feats"], small["queries"], small["wordlens"]
    # At initialisation the weight maps shrink the activations of a deep
    # predictor towards zero, so the scores alone would compare nothing:
    # compare every stage's output, relative to its size.
    # The strip convolutions call the conv weights directly, so the layers of
    # the stack are seen one by one only on the dense path (STRIP_ROWS 0).
    dense = cfg.MODEL.TAN.PREDICTOR.STRIP_ROWS == 0
    stages = ["featpool", "feat2d", "integrator"] + [
        f"predictor.convs.{k}" for k in range(cfg.MODEL.TAN.PREDICTOR.NUM_STACK_LAYERS) if dense]
    outputs = {}

    def run(dev):
        hooks = [model.get_submodule(name).register_forward_hook(
            lambda mod, inp, out, name=name: outputs.setdefault(dev, {}).__setitem__(name, out.detach().cpu()))
            for name in stages]
        with torch.no_grad():
            logits = model(feats.to(dev), queries.to(dev), wordlens).cpu()
        for h in hooks:
            h.remove()
        outputs[dev]["logits"] = logits

    run("cpu")
    model.to(device)
    run(str(device))
    report = {"config": args.config_file, "output_shape": list(outputs[str(device)]["logits"].shape),
              "relative_diff_cpu_vs_device": {
                  name: float((outputs["cpu"][name] - outputs[str(device)][name]).norm()
                              / outputs["cpu"][name].norm().clamp(min=1e-30))
                  for name in stages + ["logits"]},
              "first_band_recomputed_bit_for_bit": first_band_check(cfg, device, small)}

    # Training steps at the real shapes (cuDNN defaults, as a user runs it),
    # through the trainer's own step.
    torch.backends.cudnn.allow_tf32 = True
    model.train()
    optimizer = build_optimizer(cfg, model, model.recipe(cfg))
    scaler = make_grad_scaler(cfg.SOLVER.AMP, device)
    batch = random_batch(cfg, args.batch, device, seed=1)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    for step in range(args.steps + 3):
        if step == 3:
            if cuda:
                torch.cuda.synchronize()
            start = time.perf_counter()
        loss, _ = run_step(model, batch, optimizer, scaler, cfg.SOLVER.AMP, device,
                           model_class(cfg).recipe(cfg).clip_grad_norm)
    if cuda:
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    report.update(train_samples_per_s=args.batch * args.steps / elapsed, loss=loss.item(), device=str(device))
    if cuda:
        report.update(train_peak_memory_gb=torch.cuda.max_memory_allocated() / 2 ** 30,
                      device=torch.cuda.get_device_name())
    print(json.dumps(report))


if __name__ == "__main__":
    run_cli(main)
