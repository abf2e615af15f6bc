"""What train and test do first: assemble the config, check the data, join the
process group, pick the device, prepare OUTPUT_DIR and logging, seed."""
import os
from dataclasses import dataclass

import torch

from ..config import load_config, save_config
from ..data import RunData, check_batch_sizes
from ..engine.precision import check_amp_support, configure_backends
from ..errors import TanError
from ..utils import comm
from ..utils.events import check_tensorboard
from ..utils.logger import setup_logger
from ..utils.rng import seed_everything


@dataclass
class Session:
    """A tool's run: the frozen config, the device, whether several processes
    take part, and the run's data (datasets are built once, on first use)."""
    cfg: object
    device: torch.device
    distributed: bool
    data: RunData


def resolve_device(name, local_rank=0):
    """MODEL.DEVICE -> torch.device; "auto" is CUDA when present; "cuda" is this process's GPU."""
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


def _prepare_output_dir(path):
    if not comm.is_main_process():
        return
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise TanError(f"OUTPUT_DIR {path!r} cannot be created: {e.strerror}") from None
    if not os.access(path, os.W_OK):
        raise TanError(f"OUTPUT_DIR {path!r} is not writable")


def _log_run(logger, args, cfg, device):
    logger.info("using %d process(es), device %s", comm.get_world_size(), device)
    logger.info("arguments: %s", args)
    if args.config_file:
        with open(args.config_file) as f:
            logger.info("config file %s:\n%s", args.config_file, f.read().rstrip())
    logger.info("running with config:\n%s", cfg.dump().rstrip())


def default_setup(args, save=True):
    """A :class:`Session`, with the process group joined and logging set up.

    The config and the data files are checked before any work, so mistakes fail
    fast on every rank and leave earlier outputs untouched."""
    local_rank = args.local_rank if args.local_rank is not None else int(os.environ.get("LOCAL_RANK", "0"))
    cfg = load_config(args.config_file, args.opts)
    data = RunData(cfg)
    data.check_files()
    check_tensorboard(cfg)
    use_cuda = cfg.MODEL.DEVICE != "cpu" and torch.cuda.is_available()
    distributed = comm.init_distributed(local_rank, use_cuda, cfg.DISTRIBUTED.TIMEOUT)
    device = resolve_device(cfg.MODEL.DEVICE, local_rank)
    check_amp_support(cfg.SOLVER.AMP, device)
    configure_backends(cfg, device)
    check_batch_sizes(cfg, comm.get_world_size())
    _prepare_output_dir(cfg.OUTPUT_DIR)
    comm.synchronize()
    logger = setup_logger(cfg.OUTPUT_DIR, comm.get_rank())
    _log_run(logger, args, cfg, device)
    if save and comm.is_main_process():
        path = os.path.join(cfg.OUTPUT_DIR, "config.yml")
        save_config(cfg, path)
        logger.info("saved the merged config to %s", path)
    seed_everything(cfg.SEED)
    return Session(cfg, device, distributed, data)
