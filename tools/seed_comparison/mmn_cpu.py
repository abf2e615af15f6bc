"""MCG-NJU/MMN's own training code, unchanged, on the CPU with a seed: its train_net.py's train()
and run_test() in the setting its main() always uses (one process of a process group, its
DistributedSampler, DistributedDataParallel), with the seed its main() fixes at 25285 taken from
--seed instead.

Its DistilBERT is a small random one (one layer of width 768, the width its text encoder's layers
are built for, over the dataset's words), written once under the dataset's root as
``distilbert-base-uncased/``, the name its code loads: run from that folder, transformers reads it
there instead of downloading. tan's side reads the same folder (compare.py's bert_options).

Stubbed at run time only: torchtext (imported, unused with DistilBERT), "cuda" (tensors stay on the
CPU; no CUDA memory figures), the NCCL process group (gloo, one process) and
DistributedDataParallel's device ids (none on the CPU).

  python tools/seed_comparison/mmn_cpu.py --reference PATH --data ROOT --seed 1 --out RUN
  python tools/seed_comparison/mmn_cpu.py --reference PATH --data ROOT --seed 0 --out RUN --dump 16

--dump N: instead, its model, data loader and its do_train's step (its loss terms, weights and
clipping) for the first N steps, writing RUN/init.pth (the initial weights, as a checkpoint
tan's MODEL.WEIGHT reads) and RUN/losses.json (each step's three terms, unrounded), with a
DistilBERT without dropout (on a dataset root of its own), so that a step draws no random
numbers. tan-train with SEED 0 draws the same batches (both shuffle epoch e from the seed e):
from those weights the two runs' steps compare one by one (step_losses.py).
"""
import argparse
import json
import os
import random
import socket
import sys
import types

import torch

from stubs import keep_on_cpu

HERE = os.path.dirname(os.path.abspath(__file__))
BERT = "distilbert-base-uncased"  # the name its code loads; a folder of that name in the working directory


def write_bert(root, dropout=0.1):
    """A one-layer random DistilBERT of width 768 and its word-piece vocabulary (every word of the
    dataset's word-vector file is one piece), under ROOT/distilbert-base-uncased; kept once written.
    ``dropout``: of its layers and attention (0 for --dump: no random draws in a step)."""
    folder = os.path.join(root, BERT)
    config = os.path.join(folder, "config.json")
    if os.path.isfile(config):
        with open(config) as f:
            written = json.load(f)["dropout"]
        if written != dropout:
            raise SystemExit(f"{folder} has dropout {written}, not {dropout}: use another dataset root")
        return folder
    from transformers import DistilBertConfig, DistilBertModel, DistilBertTokenizerFast
    words = [line.split(" ", 1)[0] for line in open(os.path.join(root, "glove", "glove.840B.300d.txt"))]
    tmp = folder + ".tmp"
    os.makedirs(tmp, exist_ok=True)
    with open(os.path.join(tmp, "vocab.txt"), "w") as f:
        f.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words) + "\n")
    torch.manual_seed(0)
    bert = DistilBertConfig(vocab_size=len(words) + 5, dim=768, n_layers=1, n_heads=4, hidden_dim=256,
                            max_position_embeddings=64, dropout=dropout, attention_dropout=dropout)
    DistilBertModel(bert).save_pretrained(tmp)
    DistilBertTokenizerFast(os.path.join(tmp, "vocab.txt"), do_lower_case=True).save_pretrained(tmp)
    os.replace(tmp, folder)
    return folder


def install_stubs():
    sys.modules["torchtext"] = types.ModuleType("torchtext")
    keep_on_cpu()
    init = torch.distributed.init_process_group
    torch.distributed.init_process_group = lambda backend=None, **kwargs: init("gloo", **kwargs)
    ddp = torch.nn.parallel.DistributedDataParallel

    def on_cpu_ddp(module, device_ids=None, output_device=None, **kwargs):
        return ddp(module, **kwargs)

    torch.nn.parallel.DistributedDataParallel = on_cpu_ddp


def dump(cfg, out, steps):
    """Its train()'s model, optimizer and loader and its do_train()'s step, for ``steps`` steps."""
    from mmn.data import make_data_loader
    from mmn.modeling import build_model
    model = build_model(cfg)
    torch.save({"model": {k: v.clone() for k, v in model.state_dict().items()}}, os.path.join(out, "init.pth"))
    model = torch.nn.parallel.DistributedDataParallel(model, broadcast_buffers=False, find_unused_parameters=True)
    loader = make_data_loader(cfg, is_train=True, is_distributed=True)
    named = list(model.named_parameters())  # split as its train() splits them
    params = {"bert": [p for n, p in named if "bert" in n], "base": [p for n, p in named if "bert" not in n]}
    lr = cfg.SOLVER.LR
    optimizer = torch.optim.AdamW([{"params": params["base"]}, {"params": params["bert"], "lr": lr * 0.1}], lr=lr,
                                  betas=(0.9, 0.99), weight_decay=1e-5)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=cfg.SOLVER.MILESTONES, gamma=0.1)
    model.train()
    losses, epoch = [], 1
    while len(losses) < steps:
        loader.batch_sampler.sampler.set_epoch(epoch)
        for param in params["bert"]:
            param.requires_grad_(epoch > cfg.SOLVER.FREEZE_BERT)
        for batches, idx in loader:
            optimizer.zero_grad()
            weight = cfg.MODEL.MMN.LOSS.CONTRASTIVE_WEIGHT
            loss_vid, loss_sent, loss_iou = model(batches, cur_epoch=epoch)
            loss_vid, loss_sent = loss_vid * weight, loss_sent * weight
            scale = 1.0 if epoch <= cfg.SOLVER.ONLY_IOU else 0.01
            (loss_iou + (loss_sent + loss_vid) * scale).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5)
            optimizer.step()
            losses.append({"epoch": epoch, "videos": [int(i) for i in idx], "loss_iou": loss_iou.item(),
                           "loss_vid": loss_vid.item(), "loss_sent": loss_sent.item()})
            if len(losses) == steps:
                break
        scheduler.step()
        epoch += 1
    with open(os.path.join(out, "losses.json"), "w") as f:
        json.dump(losses, f, indent=1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description="MCG-NJU/MMN's own training on the CPU, with a seed")
    parser.add_argument("--reference", required=True, help="a checkout of MCG-NJU/MMN")
    parser.add_argument("--data", required=True, help="the dataset's root (make_dataset.py --root)")
    parser.add_argument("--seed", type=int, required=True, help="the seed its main() sets (random, torch)")
    parser.add_argument("--config-file", default=os.path.join(HERE, "mmn_reference.yaml"))
    parser.add_argument("--out", required=True, help="its OUTPUT_DIR: it trains, then tests")
    parser.add_argument("--dump", type=int, default=0, metavar="N", help="instead: record its first N steps")
    args, opts = parser.parse_known_args()  # the rest: its config's KEY VALUE overrides
    if any(o.startswith("--") for o in opts):
        parser.error(f"unknown options: {[o for o in opts if o.startswith('--')]}")
    reference, data, out, config_file = (os.path.abspath(p) for p in (args.reference, args.data, args.out,
                                                                        args.config_file))
    if not os.path.isfile(os.path.join(reference, "train_net.py")):
        parser.error(f"--reference {args.reference}: expected a checkout of MCG-NJU/MMN, with train_net.py")
    write_bert(data, dropout=0.0 if args.dump else 0.1)
    os.environ["REF_DATA"] = data
    os.environ.update(WORLD_SIZE="1", RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
                      HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    install_stubs()
    sys.path.insert(0, reference)
    os.chdir(data)  # its code loads DistilBERT by the name "distilbert-base-uncased": the folder here
    import train_net
    from mmn.config import cfg
    from mmn.utils.logger import setup_logger
    from mmn.utils.miscellaneous import mkdir, save_config
    # its main(), with the seed from the command line
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.cuda.manual_seed_all(args.seed)
    torch.distributed.init_process_group(backend="nccl", init_method="env://")
    cfg.merge_from_file(config_file)
    cfg.merge_from_list(["PATHS_CATALOG", os.path.join(HERE, "mmn_reference_catalog.py"), "OUTPUT_DIR", out] + opts)
    cfg.freeze()
    mkdir(out)
    logger = setup_logger("mmn", out, 0)
    logger.info("Running with config:\n{}".format(cfg))
    save_config(cfg, os.path.join(out, "config.yml"))
    if args.dump:
        dump(cfg, out, args.dump)
        return
    model = train_net.train(cfg, 0, True)
    train_net.run_test(cfg, model, True)


if __name__ == "__main__":
    main()
