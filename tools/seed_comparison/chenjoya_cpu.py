"""chenjoya/2dtan's own code, unchanged, on the CPU with a seed: its train_net.py, or (--dump) its
model, data and training loop step by step for tan_replay.py.

Stubbed at run time only, as for any reference run here: torchtext (GloVe read from the dataset's
text file in the 400000-row layout of glove.6B, so that an unknown word is row 400000, zeros, as
its embedding() expects), "cuda" (tensors stay on the CPU; no CUDA memory figures), and torch._six
(gone from torch; its imports read PY3).

  python tools/seed_comparison/chenjoya_cpu.py --reference PATH --data ROOT --seed 1 --out RUN
  python tools/seed_comparison/chenjoya_cpu.py --reference PATH --data ROOT --seed 1 --dump RUN/dump.pt
"""
import argparse
import os
import random
import sys
import types

import numpy as np
import torch

from stubs import install_glove, keep_on_cpu

HERE = os.path.dirname(os.path.abspath(__file__))


def install_stubs(glove):
    install_glove(glove, ("glove.6B.300d",))
    keep_on_cpu()
    torch._six = types.SimpleNamespace(PY3=True)


def dump(cfg, path, steps):
    """Its build_model, make_data_loader and do_train's loop (the same calls, in the same order, so the
    same random numbers), recording the initial weights, every epoch's batches, each step's loss, the
    first step's gradients and the inputs of every query."""
    from tan.data import make_data_loader
    from tan.modeling import build_model
    model = build_model(cfg)
    init = {k: v.clone() for k, v in model.state_dict().items()}
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.SOLVER.LR)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=cfg.SOLVER.MILESTONES)
    loader = make_data_loader(cfg, is_train=True)
    dataset = loader.dataset
    model.train()
    losses, orders, grads, step = [], [], None, 0
    for _ in range(cfg.SOLVER.MAX_EPOCH):
        order = []
        for batches, targets, idxs in loader:
            order.append(list(idxs))
            if step < steps:
                optimizer.zero_grad()
                loss = model(batches, targets)
                loss.backward()
                if step == 0:
                    grads = {k: p.grad.clone() for k, p in model.named_parameters()}
                optimizer.step()
                losses.append(loss.item())
            step += 1
        orders.append(order)
        scheduler.step()
    torch.save({"init": init, "final": model.state_dict(), "orders": orders, "losses": losses, "grads0": grads,
                "records": [(a["vid"], a["sentence"], a["moment"].tolist(), a["duration"]) for a in dataset.annos],
                "feats": dict(dataset.feats), "queries": [a["query"] for a in dataset.annos]}, path)


def main():
    parser = argparse.ArgumentParser(description="chenjoya/2dtan's own training on the CPU, with a seed")
    parser.add_argument("--reference", required=True, help="a checkout of chenjoya/2dtan")
    parser.add_argument("--data", required=True, help="the dataset's root (make_dataset.py --root)")
    parser.add_argument("--seed", type=int, required=True, help="torch, numpy and random are seeded with it first")
    parser.add_argument("--config-file", default=os.path.join(HERE, "reference.yaml"))
    parser.add_argument("--out", help="its OUTPUT_DIR: train_net.py trains and tests")
    parser.add_argument("--dump", help="instead: the step-by-step record (torch.save) for tan_replay.py")
    parser.add_argument("--steps", type=int, default=10 ** 9, help="--dump: optimisation steps to take")
    args, opts = parser.parse_known_args()  # the rest: its config's KEY VALUE overrides
    if any(o.startswith("--") for o in opts):
        parser.error(f"unknown options: {[o for o in opts if o.startswith('--')]}")
    os.environ["REF_DATA"] = os.path.abspath(args.data)
    install_stubs(os.path.join(args.data, "glove", "glove.840B.300d.txt"))
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    sys.path.insert(0, os.path.abspath(args.reference))
    for name in [m for m in sys.modules if m == "tan" or m.startswith("tan.")]:
        del sys.modules[name]  # its package is also called tan
    opts = ["PATHS_CATALOG", os.path.join(HERE, "reference_catalog.py")] + opts
    if args.dump:
        from tan.config import cfg
        cfg.merge_from_file(args.config_file)
        cfg.merge_from_list(opts)
        dump(cfg, args.dump, args.steps)
        return
    import train_net
    sys.argv = ["train_net.py", "--config-file", args.config_file, "OUTPUT_DIR", args.out] + opts
    train_net.main()


if __name__ == "__main__":
    main()
