"""What train and test do first, in this order, once the tool has assembled the config: check
it and the data, join the process group, pick the device and its backends, prepare
OUTPUT_DIR (for training: lock it and check its config), start logging, seed. The result
is one :class:`Session`. Nothing here knows which trainer or evaluation runs next: a
trainer refuses what it cannot run before it calls set-up (tan/engine/trainer.py)."""
import os
from dataclasses import dataclass

import torch

from ..evaluation.evaluator import check_evaluators_registered
from ..data import ALL_SPLITS, RunData
from .precision import backend_warnings, prepare_backends
from ..errors import TanError
from ..utils import comm
from ..utils.events import check_tensorboard
from ..utils.io import read_named_text
from ..utils.logger import log_file_failure, setup_logger
from ..utils.rng import seed_everything
from .run_folder import create_output_dir, open_run_folder, take_back_log


# Evaluation reads the test split only: no training file needs to be on disk.
EVALUATION_SPLITS = ("TEST",)


@dataclass
class Session:
    """A tool's run: the frozen config, the device, whether several processes
    take part, the run's data (datasets are built once, on first use) and, for
    training on rank 0, the locked run folder (tan/engine/run_folder.py: its
    accepted config changes, whether this run starts it)."""
    cfg: object
    device: torch.device
    distributed: bool
    data: RunData
    folder: object = None
    output_made: bool = False  # evaluation: OUTPUT_DIR did not exist before this run (rank 0)
    log_started: bool = False  # evaluation: OUTPUT_DIR/log.txt is this run's own (rank 0)

    def close(self):
        """The run is over, however it ended: give the run folder's lock back (also done at exit). A
        run refused before it wrote anything but its log takes the log back, and OUTPUT_DIR where it
        made it (:meth:`tan.engine.run_folder.RunFolder.release`)."""
        if self.folder is not None:
            self.folder.release()
        else:
            take_back_log(self.cfg.OUTPUT_DIR, self.log_started, self.output_made)


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


def _prepare_output_dir(cfg, training, accept_changes):
    """Rank 0 creates OUTPUT_DIR, and for training locks it and checks its config
    (tan/engine/run_folder.py); every rank stops if that fails. Returns (the run folder for
    training on rank 0, whether OUTPUT_DIR was made by this run)."""
    folder, created, error = None, False, None
    if comm.is_main_process():
        try:
            if training:
                folder = open_run_folder(cfg, accept_changes)
                created = folder.created
            else:
                created = create_output_dir(cfg.OUTPUT_DIR)
        except TanError as e:
            error = e
    if comm.reduce_max_int(error is not None):
        raise error or TanError(f"rank 0 could not prepare OUTPUT_DIR {cfg.OUTPUT_DIR!r} (its message says why)")
    return folder, created


def _start_log(cfg):
    """log.txt on rank 0; a log that cannot be written at start stops the run and is not left empty."""
    try:
        return setup_logger(cfg.OUTPUT_DIR, comm.get_rank())
    except OSError as e:
        raise TanError(f"cannot write {os.path.join(cfg.OUTPUT_DIR, 'log.txt')}: {e.strerror or e}") from None


def _check_log(existed):
    failure = log_file_failure()
    if failure is None:
        return
    path, error = failure
    if not existed and os.path.isfile(path) and os.path.getsize(path) == 0:
        os.unlink(path)
    raise TanError(f"cannot write {path}: {error.strerror or error}")


def _log_run(logger, args, cfg, device):
    logger.info("using %d process(es), device %s", comm.get_world_size(), device)
    logger.info("arguments: %s", args)
    if getattr(args, "config_file", None):
        text = read_named_text(args.config_file, f"config file {args.config_file!r}")
        logger.info("config file %s:\n%s", args.config_file, text.rstrip())
    logger.info("running with config:\n%s", cfg.dump().rstrip())
    for level, message in backend_warnings(cfg, device):
        logger.log(level, "%s", message)


def default_setup(cfg, args, training=True, declared=None):
    """A :class:`Session` for the merged config ``cfg`` (:func:`tan.config.load_config`), with the
    process group joined and logging set up; ``args`` are the tool's parsed arguments and
    ``declared`` the model's :class:`tan.config.models.Declarations` when the caller has asked
    them already (:meth:`tan.engine.Trainer.set_up` has, for its refusals).

    The config and the data files are checked before any work, so mistakes fail
    fast on every rank and leave earlier outputs untouched. A training run holds
    OUTPUT_DIR alone and refuses a config that differs from the folder's own
    (``--accept-config-changes`` overrides; the change is recorded by the trainer
    once the checkpoint is restored). Evaluation (``training`` False) reads only
    DATASETS.TEST."""
    local_rank = args.local_rank if args.local_rank is not None else int(os.environ.get("LOCAL_RANK", "0"))
    data = RunData(cfg, splits=ALL_SPLITS if training else EVALUATION_SPLITS, declared=declared)
    check_tensorboard(cfg)
    data.check_before_work()  # files, the model's needs, the text input (e.g. a tokenizer, read once and kept)
    evaluated = set(cfg.DATASETS.VAL) | set(cfg.DATASETS.TEST)
    check_evaluators_registered([entry for entry in data.entries() if entry["name"] in evaluated])
    use_cuda = cfg.MODEL.DEVICE != "cpu" and torch.cuda.is_available()
    distributed = comm.init_distributed(local_rank, use_cuda, cfg.DISTRIBUTED.TIMEOUT)
    device = resolve_device(cfg.MODEL.DEVICE, local_rank)
    prepare_backends(cfg, device)
    # on every rank: reading a generated dataset's annotations writes it first (rank 0, the others wait)
    data_warnings = data.check_with_processes(comm.get_world_size())
    folder, output_made = _prepare_output_dir(cfg, training, getattr(args, "accept_config_changes", False))
    # a run refused before it wrote more than its log takes that log back (RunFolder.release, Session.close)
    log_started = comm.is_main_process() and not os.path.exists(os.path.join(cfg.OUTPUT_DIR, "log.txt"))
    if folder is not None:
        folder.log_started = log_started
    try:
        logger = _start_log(cfg)
        _log_run(logger, args, cfg, device)
        if comm.is_main_process():
            _check_log(not log_started)
            for warning in data_warnings:
                logger.warning("%s", warning)
        if folder is not None:
            folder.describe(logger)
    except BaseException:  # a TanError, or Ctrl-C: the run never started
        if folder is not None:
            folder.abandon()
        else:
            take_back_log(cfg.OUTPUT_DIR, log_started, output_made)
        raise
    seed_everything(cfg.SEED)
    return Session(cfg, device, distributed, data, folder, output_made, log_started)
