"""MCG-NJU/MMN's own training code, unchanged, on the CPU with a seed: its train_net.py's train()
and run_test() in the setting its main() always uses (one process of a process group, its
DistributedSampler, DistributedDataParallel), with the seed its main() fixes at 25285 taken from
--seed instead.

Its DistilBERT is a small random one (one layer of width 768, the width its text encoder's layers
are built for, over the dataset's words), written once under the dataset's root as
``distilbert-base-uncased/``, the name its code loads: run from that folder, transformers reads it
there instead of downloading. tan's side reads the same folder (MMN_TAN_OPTS in compare.py).

Stubbed at run time only: torchtext (imported, unused with DistilBERT), "cuda" (tensors stay on the CPU; no CUDA memory figures), the NCCL
process group (gloo, one process) and DistributedDataParallel's device ids (none on the CPU).

  python tools/seed_comparison/mmn_cpu.py --reference PATH --data ROOT --seed 1 --out RUN
"""
import argparse
import os
import random
import socket
import sys
import types

import torch

from stubs import keep_on_cpu

HERE = os.path.dirname(os.path.abspath(__file__))
BERT = "distilbert-base-uncased"  # the name its code loads; a folder of that name in the working directory


def write_bert(root):
    """A one-layer random DistilBERT of width 768 and its word-piece vocabulary (every word of the
    dataset's word-vector file is one piece), under ROOT/distilbert-base-uncased; kept once written."""
    folder = os.path.join(root, BERT)
    if os.path.isfile(os.path.join(folder, "config.json")):
        return folder
    from transformers import DistilBertConfig, DistilBertModel, DistilBertTokenizerFast
    words = [line.split(" ", 1)[0] for line in open(os.path.join(root, "glove", "glove.840B.300d.txt"))]
    tmp = folder + ".tmp"
    os.makedirs(tmp, exist_ok=True)
    with open(os.path.join(tmp, "vocab.txt"), "w") as f:
        f.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words) + "\n")
    torch.manual_seed(0)
    config = DistilBertConfig(vocab_size=len(words) + 5, dim=768, n_layers=1, n_heads=4, hidden_dim=256,
                              max_position_embeddings=64)
    DistilBertModel(config).save_pretrained(tmp)
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
    args, opts = parser.parse_known_args()  # the rest: its config's KEY VALUE overrides
    if any(o.startswith("--") for o in opts):
        parser.error(f"unknown options: {[o for o in opts if o.startswith('--')]}")
    data, out, config_file = (os.path.abspath(p) for p in (args.data, args.out, args.config_file))
    write_bert(data)
    os.environ["REF_DATA"] = data
    os.environ.update(WORLD_SIZE="1", RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
                      HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    install_stubs()
    reference = os.path.abspath(args.reference)
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
    model = train_net.train(cfg, 0, True)
    train_net.run_test(cfg, model, True)


if __name__ == "__main__":
    main()
