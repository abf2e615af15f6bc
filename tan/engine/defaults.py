"""What every tool does first: parse arguments, join the process group,
assemble the config, set up logging and seeds, pick the device."""
import argparse
import datetime
import os
import random
import sys

import numpy as np
import torch

from ..config import load_config, save_config
from ..data import check_data_files
from ..errors import TanError
from ..utils import comm
from ..utils.events import check_tensorboard
from ..utils.logger import get_logger, setup_logger
from .precision import configure_backends
from .interrupt import TrainingInterrupted
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


def _init_distributed(local_rank, cfg):
    """Join the process group that torchrun (or a legacy launcher) describes in the environment."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return False
    use_cuda = cfg.MODEL.DEVICE != "cpu" and torch.cuda.is_available()
    if use_cuda:
        torch.cuda.set_device(local_rank)
    if not torch.distributed.is_initialized():
        # NCCL moves CUDA tensors; gloo serves CPU runs. A collective waits at
        # most DISTRIBUTED.TIMEOUT for a peer, so a dead or hung one ends the run.
        backend = "nccl" if use_cuda else "gloo"
        timeout = datetime.timedelta(seconds=cfg.DISTRIBUTED.TIMEOUT)
        store = _restart_store(timeout)
        if store is None:
            torch.distributed.init_process_group(backend, init_method="env://", timeout=timeout)
        else:
            torch.distributed.init_process_group(backend, store=store, rank=int(os.environ["RANK"]),
                                                 world_size=world_size, timeout=timeout)
    return True


def _restart_store(timeout):
    """After a torchrun restart, the agent's store still holds the previous
    attempt's connection keys, and gloo then waits for peers that are gone.
    Keys of each attempt go under their own prefix instead. None: use env://."""
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    if attempt == 0 or os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return None
    store = torch.distributed.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                                       int(os.environ["WORLD_SIZE"]), is_master=False, timeout=timeout)
    return torch.distributed.PrefixStore(f"tan/attempt_{attempt}", store)


def seed_everything(seed):
    random.seed(seed)
    np.random.seed(seed % 2 ** 32)
    torch.manual_seed(seed)


def default_setup(args, save=True):
    """(cfg, device, distributed) with the process group joined and logging set up."""
    local_rank = args.local_rank if args.local_rank is not None else int(os.environ.get("LOCAL_RANK", "0"))
    # Read the config and look for the data files before any work, so that
    # mistakes fail fast on every rank and leave earlier outputs untouched.
    cfg = load_config(args.config_file, args.opts)
    check_data_files(cfg)
    check_tensorboard(cfg)
    distributed = _init_distributed(local_rank, cfg)
    device = resolve_device(cfg.MODEL.DEVICE, local_rank)
    if cfg.SOLVER.AMP == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise TanError(f"SOLVER.AMP bf16: GPU {torch.cuda.get_device_name(device)} has no bfloat16 support; "
                       f"use SOLVER.AMP fp16 or off")
    configure_backends(cfg, device)
    for key in ("SOLVER.BATCH_SIZE", "TEST.BATCH_SIZE"):
        section, name = key.split(".")
        if cfg[section][name] % comm.get_world_size():
            raise TanError(f"{key} = {cfg[section][name]} is a global batch size and must be divisible by the "
                           f"number of processes ({comm.get_world_size()})")
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


def _is_communication_failure(error):
    """A failed or timed-out collective: DistError (torch >= 2.1), or the
    RuntimeError that gloo raises when a peer does not answer."""
    if not comm.is_dist():
        return False
    dist_error = getattr(torch.distributed, "DistError", ())
    text = str(error)
    return isinstance(error, dist_error) or any(
        marker in text for marker in ("Timed out", "timed out", "Connection closed by peer", "Connection reset"))


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
    except TrainingInterrupted as e:
        _report("warning", e)
        sys.exit(128 + e.signum)  # the shell's convention for "ended by this signal"
    except RuntimeError as e:
        if not _is_communication_failure(e):
            raise
        _report("error", f"distributed communication failed on rank {comm.get_rank()}: a peer process stopped or "
                         f"did not answer within DISTRIBUTED.TIMEOUT ({type(e).__name__}: {e})")
        sys.exit(4)
    finally:
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
