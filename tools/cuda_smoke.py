#!/usr/bin/env python
"""Check that the model gives the same scores on CUDA as on CPU, and time a
few training steps at a config's real shapes on random inputs.

Example:
  python tools/cuda_smoke.py --config-file configs/2dtan_128x128_pool_k5l8_tacos.yaml --batch 32
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

from tan.config import load_config  # noqa: E402
from tan.modeling import build_model  # noqa: E402


def random_batch(cfg, batch, device, generator):
    words = 12
    return (torch.randn(batch, cfg.INPUT.NUM_PRE_CLIPS, cfg.MODEL.TAN.FEATPOOL.INPUT_SIZE, generator=generator)
            .abs().to(device),
            torch.randn(batch, words, cfg.INPUT.PRE_QUERY_SIZE, generator=generator).to(device),
            torch.randint(3, words + 1, (batch,), generator=generator))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config-file", required=True)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--device", default="cuda", help="device to compare with the CPU and to time on")
    parser.add_argument("opts", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here")
    cuda = device.type == "cuda"
    cfg = load_config(args.config_file, args.opts)
    torch.backends.cudnn.allow_tf32 = False  # compare in true float32
    torch.backends.cuda.matmul.allow_tf32 = False
    gen = torch.Generator().manual_seed(0)
    model = build_model(cfg).eval()
    feats, queries, wordlens = random_batch(cfg, 4, "cpu", gen)
    # At initialisation the weight maps shrink the activations of a deep
    # predictor towards zero, so the scores alone would compare nothing:
    # compare every stage's output, relative to its size.
    stages = ["featpool", "feat2d", "integrator"] + [f"predictor.convs.{k}" for k in
                                                     range(cfg.MODEL.TAN.PREDICTOR.NUM_STACK_LAYERS)]
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
                  for name in stages + ["logits"]}}

    # Training steps at the real shapes (cuDNN defaults, as a user runs it).
    torch.backends.cudnn.allow_tf32 = True
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.SOLVER.LR)
    batch = random_batch(cfg, args.batch, device, gen)
    moments = torch.tensor([[1.0, 5.0]], device=device).expand(args.batch, 2)
    durations = torch.full((args.batch,), 10.0, device=device)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    for step in range(args.steps + 3):
        if step == 3:
            if cuda:
                torch.cuda.synchronize()
            start = time.perf_counter()
        loss = model.loss(model(*batch), moments, durations)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    if cuda:
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    report.update(train_samples_per_s=args.batch * args.steps / elapsed, loss=loss.item(), device=str(device))
    if cuda:
        report.update(train_peak_memory_gb=torch.cuda.max_memory_allocated() / 2 ** 30,
                      device=torch.cuda.get_device_name())
    print(json.dumps(report))


if __name__ == "__main__":
    main()
