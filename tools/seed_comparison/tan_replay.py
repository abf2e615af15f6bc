"""tan's model, data and optimisation replayed on a dump of the reference's training
(chenjoya_cpu.py --dump): the same initial weights and the same batches in the same order, or
(--own-order) tan's own batches; the inputs, the first step's loss and gradients and the losses
along the way compared, and the final weights saved as a checkpoint tan-test reads.

  python tools/seed_comparison/tan_replay.py DUMP.pt --data ROOT --out FINAL.pth [--own-order] [KEY VALUE ...]
"""
import argparse
import os

import numpy as np
import torch

from tan.config import load_config
from tan.data.build import RunData
from tan.data.collate import BatchCollator
from tan.engine.step import run_step
from tan.modeling import build_model
from tan.solver import build_lr_scheduler, build_optimizer
from tan.utils.io import atomic_torch_save
from tan.utils.rng import seed_everything

HERE = os.path.dirname(os.path.abspath(__file__))
SHOWN_STEPS = (0, 1, 5, 10, 50, 100, 200, 400, 600, 800)


def query_key(video, sentence, moment):
    return video, sentence, round(moment[0], 3), round(moment[1], 3)


def reference_to_tan(dataset, records):
    """tan's index of each of the reference's queries, matched by video, sentence and moment."""
    ours = {}
    for i in range(len(dataset)):
        key = query_key(dataset.videos[dataset.video_ids[i]], dataset.sentences[i], dataset[i]["moment"].tolist())
        ours.setdefault(key, []).append(i)
    return [ours[query_key(video, sentence, moment)].pop(0) for video, sentence, moment, _ in records]


def compare_inputs(dataset, dump, mapping, every=37):
    features = max(float((dataset[mapping[j]]["feats"] - dump["feats"][dump["records"][j][0]]).abs().max())
                   for j in range(0, len(mapping), every))
    words = max(float((dataset[mapping[j]]["query"] - dump["queries"][j]).abs().max())
                for j in range(0, len(mapping), every))
    print(f"inputs (every {every}th query): max |feature difference| {features:.3g}, "
          f"max |word vector difference| {words:.3g}")


def first_step(model, loss, dump):
    grads = {k: p.grad for k, p in model.named_parameters()}
    worst = max(float((grads[k] - dump["grads0"][k]).abs().max() / (dump["grads0"][k].abs().max() + 1e-30))
                for k in grads)
    print(f"step 1: loss tan {loss:.7f}, reference {dump['losses'][0]:.7f}; "
          f"largest gradient difference relative to the tensor's largest gradient {worst:.3g}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dump")
    parser.add_argument("--data", required=True, help="the dataset's root (make_dataset.py --root)")
    parser.add_argument("--out", required=True, help="the final weights, as a checkpoint ({'model': state dict})")
    parser.add_argument("--own-init", action="store_true", help="tan's own initial weights of this SEED")
    parser.add_argument("--own-order", action="store_true", help="tan's own batches (its sampler), not the dump's")
    args, opts = parser.parse_known_args()  # the rest: KEY VALUE overrides of tan.yaml (SEED, ...)
    if any(o.startswith("--") for o in opts):
        parser.error(f"unknown options: {[o for o in opts if o.startswith('--')]}")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)  # before the training, not after it
    dump = torch.load(args.dump, weights_only=False)
    cfg = load_config(os.path.join(HERE, "tan.yaml"), ["DATASETS.ROOT", args.data, "OUTPUT_DIR",
                                                       os.path.dirname(os.path.abspath(args.out))] + opts)
    seed_everything(cfg.SEED)
    model = build_model(cfg)
    own = model.state_dict()
    print("tan's initial weights of this SEED equal the reference's:",
          sorted(own) == sorted(dump["init"]) and all(torch.equal(own[k], dump["init"][k]) for k in own))
    if not args.own_init:
        model.load_state_dict(dump["init"])
    data = RunData(cfg)
    dataset = data.dataset(cfg.DATASETS.TRAIN[0])
    mapping = reference_to_tan(dataset, dump["records"])
    print(f"queries: tan {len(dataset)}, reference {len(dump['records'])}")
    compare_inputs(dataset, dump, mapping)
    collate, loader = BatchCollator(), data.train_loader(False)
    optimizer, device = build_optimizer(cfg, model, model.recipe(cfg)), torch.device("cpu")
    scheduler = build_lr_scheduler(cfg, optimizer)
    model.train()
    losses = []
    for epoch in range(1, cfg.SOLVER.MAX_EPOCH + 1):
        if args.own_order:
            loader.sampler.set_epoch(epoch)
            batches = loader
        else:
            batches = (collate([dataset[mapping[j]] for j in idxs]) for idxs in dump["orders"][epoch - 1])
        for batch in batches:
            loss, _ = run_step(model, batch, optimizer, None, "off", device)
            if not losses and not args.own_init:
                first_step(model, loss.item(), dump)
            losses.append(loss.item())
        scheduler.step()
    steps = min(len(dump["losses"]), len(losses))
    reference, ours = np.array(dump["losses"][:steps]), np.array(losses[:steps])
    for step in [s for s in SHOWN_STEPS if s < steps - 1] + [steps - 1]:
        print(f"step {step + 1:4d}: loss tan {ours[step]:.6f}, reference {reference[step]:.6f}, "
              f"|difference| {abs(ours[step] - reference[step]):.2e}")
    final = model.state_dict()
    if len(losses) == len(dump["losses"]):  # the whole training on both sides
        print("final weights: max |difference|", max(float((final[k] - dump["final"][k]).abs().max()) for k in final))
    atomic_torch_save({"model": final, "losses": losses}, args.out)


if __name__ == "__main__":
    main()
