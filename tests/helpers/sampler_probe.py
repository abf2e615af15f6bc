"""Launched by torchrun from test_distributed.py: the indices of each rank's
first training batch in epochs 1 and 2, written by rank 0 as JSON."""
import json
import sys

import torch.distributed as dist

from tan.config import load_config
from tan.data import make_data_loader
from tan.utils import comm
import tan_apps.synthetic  # noqa: F401  (the generator of the built-in synthetic dataset)


def main(config, root, out):
    dist.init_process_group("gloo")
    cfg = load_config(config, ["DATASETS.ROOT", root, "DATALOADER.NUM_WORKERS", "0"])
    loader = make_data_loader(cfg, is_train=True, is_distributed=True)
    firsts = {}
    for epoch in (1, 2):
        loader.sampler.set_epoch(epoch)
        firsts[epoch] = next(iter(loader))["indices"].tolist()
    gathered = comm.all_gather(firsts)
    if comm.is_main_process():
        with open(out, "w") as f:
            json.dump({"batch_per_rank": len(firsts[1]), "ranks": gathered}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:])
