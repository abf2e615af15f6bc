"""What every tool does first: parse arguments, join the process group,
assemble the config, set up logging and seeds, pick the device."""
import argparse
import os
import random
import sys

import numpy as np
import torch

from ..config import load_config, save_config
from ..errors import TanError
from ..utils import comm
from ..utils.logger import get_logger, setup_logger
from .trainer import NonFiniteLossError

DEFAULT_CONFIG = os.path.join(os.path.dirname(__file__), "..", "..", "configs",
                              "2dtan_128x128_pool_k5l8_tacos.yaml")


class _ArgumentParser(argparse.ArgumentParser):
    """Options may also follow the trailing KEY VALUE pairs (``... SOLVER.LR 0.1 --skip-test``).

    Config keys and values never start with "--", so such tokens (and the value
    of an option that takes one) are moved in front before parsing.
    """

    def parse_args(self, args=None, namespace=None):
        args = list(sys.argv[1:] if args is None else args)
        takes_value = {s: a.nargs != 0 for a in self._actions for s in a.option_strings}
        front, rest, k = [], [], 0
        while k < len(args):
            token = args[k]
            name = token.split("=", 1)[0]
            if name in takes_value:
                front.append(token)
                if takes_value[name] and "=" not in token and k + 1 < len(args):
                    front.append(args[k + 1])
                    k += 1
            else:
                rest.append(token)
            k += 1
        return super().parse_args(front + rest, namespace)


def default_argument_parser(description, epilog=""):
    parser = _ArgumentParser(description=description, epilog=epilog,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config-file", default=os.path.normpath(DEFAULT_CONFIG), metavar="FILE",
                        help="YAML config file (default: the TACoS reference config)")
    # Legacy launchers pass --local_rank / --local-rank; torchrun sets LOCAL_RANK.
    parser.add_argument("--local_rank", "--local-rank", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("opts", nargs=argparse.REMAINDER, metavar="KEY VALUE",
                        help="config overrides, e.g. SOLVER.MAX_EPOCH 5 OUTPUT_DIR outputs/run1")
    return parser


def resolve_device(name, local_rank=0):
    if name == "cpu":
        return torch.device("cpu")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
        if name == "cpu":
            return torch.device("cpu")
    if not torch.cuda.is_available():
        raise TanError(f"MODEL.DEVICE is {name!r} but CUDA is not available on this machine; "
                       f"use MODEL.DEVICE cpu (or auto)")
    index = int(name.split(":")[1]) if ":" in name else local_rank
    if index >= torch.cuda.device_count():
        raise TanError(f"MODEL.DEVICE asks for GPU {index} but only {torch.cuda.device_count()} are visible")
    return torch.device("cuda", index)


def _init_distributed(local_rank, device_name):
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return False
    use_cuda = device_name != "cpu" and torch.cuda.is_available()
    if use_cuda:
        torch.cuda.set_device(local_rank)
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group("nccl" if use_cuda else "gloo", init_method="env://")
    return True


def seed_everything(seed):
    random.seed(seed)
    np.random.seed(seed % 2 ** 32)
    torch.manual_seed(seed)


def default_setup(args, save=True):
    """(cfg, device, distributed) with the process group joined and logging set up."""
    local_rank = args.local_rank if args.local_rank is not None else int(os.environ.get("LOCAL_RANK", "0"))
    # Read the config before any work so that mistakes fail fast on every rank.
    cfg = load_config(args.config_file, args.opts)
    distributed = _init_distributed(local_rank, cfg.MODEL.DEVICE)
    device = resolve_device(cfg.MODEL.DEVICE, local_rank)
    if comm.is_main_process():
        try:
            os.makedirs(cfg.OUTPUT_DIR, exist_ok=True)
        except OSError as e:
            raise TanError(f"OUTPUT_DIR {cfg.OUTPUT_DIR!r} cannot be created: {e.strerror}") from None
        if not os.access(cfg.OUTPUT_DIR, os.W_OK):
            raise TanError(f"OUTPUT_DIR {cfg.OUTPUT_DIR!r} is not writable")
    comm.synchronize()
    logger = setup_logger(cfg.OUTPUT_DIR, comm.get_rank())
    logger.info("using %d process(es), device %s", comm.get_world_size(), device)
    logger.info("arguments: %s", args)
    if args.config_file:
        with open(args.config_file) as f:
            logger.info("config file %s:\n%s", args.config_file, f.read().rstrip())
    logger.info("running with config:\n%s", cfg.dump().rstrip())
    if save and comm.is_main_process():
        path = os.path.join(cfg.OUTPUT_DIR, "config.yml")
        save_config(cfg, path)
        logger.info("saved the merged config to %s", path)
    seed_everything(cfg.SEED)
    return cfg, device, distributed


def _report(level, error):
    logger = get_logger()
    if logger.handlers:  # logging is set up: stdout and log.txt
        getattr(logger, level)("%s", error)
    else:
        print(f"{level}: {error}", file=sys.stderr)


def run_cli(main):
    """Run ``main()``; user errors and a diverging loss end with a message and a non-zero status."""
    try:
        main()
    except TanError as e:
        _report("error", e)
        sys.exit(2)
    except NonFiniteLossError as e:
        _report("critical", e)
        sys.exit(3)
    finally:
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
