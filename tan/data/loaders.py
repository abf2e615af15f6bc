"""The loaders of a run: its datasets batched for one process or many, each
loader built once and shared (periodic evaluation uses the final test's)."""
import bisect

import numpy as np
import torch
from torch.utils.data import ConcatDataset, DataLoader, Subset

from ..errors import TanError
from ..utils import comm
from ..utils.logger import get_logger
from .collate import BatchCollator, VideoBatchCollator
from .samplers import ResumableDistributedSampler
from .video_groups import VideoGroups

VAL_FALLBACK_WARNING = (
    "DATASETS.VAL is empty: periodic evaluation and model_best.pth use DATASETS.TEST (the reference's habit; "
    "its datasets that have labels), "
    "so the best model's test figures are optimistic; select epochs on a validation split, or report the "
    "final model's figures")


class RunLoaders:
    """The loaders over the datasets of ``run_data`` (a :class:`tan.data.RunData`)."""

    def __init__(self, run_data):
        self.run_data = run_data
        self._train = {}  # (distributed, by_video) -> loader
        self._evals = {}  # (name, distributed, by_video) -> loader, shared by validation and test
        self._warned_val_fallback = False

    def _loader(self, dataset, batch_key, shuffle, distributed, by_video=False):
        world, rank = (comm.get_world_size(), comm.get_rank()) if distributed else (1, 0)
        batch_size = per_process_batch(self.run_data.cfg, batch_key, comm.get_world_size())
        # One sampler for one or many processes: shuffled from SEED and the epoch,
        # so a resumed run sees the same order as an uninterrupted one. Sampled
        # sentences of a video are drawn from the epoch too (training only).
        # Training windows of a clip input are drawn from the epoch in the same way.
        sampled = by_video and shuffle and self.run_data.cfg.DATALOADER.SENTENCES_PER_VIDEO > 0
        clips = self.run_data.declared.clip_input
        variable = clips.variable_length
        if variable and by_video:
            raise TanError(f"MODEL.ARCHITECTURE {self.run_data.cfg.MODEL.ARCHITECTURE!r} takes videos of different "
                           f"lengths (its clip input) and asks for batches of videos; batches of videos need videos "
                           f"of one length")
        windowed = shuffle and self.run_data.train_windows is not None  # INPUT.TRAIN_WINDOW
        sampler = ResumableDistributedSampler(dataset, world, rank, shuffle, self.run_data.cfg.SEED, batch_size,
                                              keyed_by_epoch=sampled or windowed or (shuffle and variable),
                                              order=longest_first(dataset) if clips.longest_first and not shuffle
                                              and not by_video else None)
        workers = self.run_data.cfg.DATALOADER.NUM_WORKERS
        return DataLoader(dataset, batch_size=batch_size, sampler=sampler, num_workers=workers,
                          collate_fn=VideoBatchCollator() if by_video else BatchCollator(),
                          pin_memory=torch.cuda.is_available(), persistent_workers=workers > 0)

    def train(self, distributed, by_video=False):
        """One shuffled loader over the concatenated DATASETS.TRAIN (SOLVER.BATCH_SIZE over all
        processes): batches of queries, or of videos with their sentences (``by_video``)."""
        key = (distributed, by_video)
        if key not in self._train:
            datasets = self.run_data.datasets(self.run_data.cfg.DATASETS.TRAIN)
            _refuse_unlabeled(datasets, "DATASETS.TRAIN", "trained on")
            if by_video:  # all of a video's sentences, or a sample of them (DATALOADER.SENTENCES_PER_VIDEO)
                dataset = VideoGroups(datasets, self.run_data.cfg.DATALOADER.SENTENCES_PER_VIDEO, self.run_data.cfg.SEED,
                                      windowed=self.run_data.train_windows is not None)
            else:
                dataset = datasets[0] if len(datasets) == 1 else KeyedConcatDataset(datasets)
            self._train[key] = self._loader(dataset, "SOLVER.BATCH_SIZE", True, distributed, by_video)
        return self._train[key]

    def val(self, distributed, by_video=False):
        """Loaders of DATASETS.VAL for periodic evaluation; of DATASETS.TEST's datasets that have labels
        (with a warning) when VAL is empty: a split without labels has nothing to validate on."""
        names = self.run_data.cfg.DATASETS.VAL
        if names:
            _refuse_unlabeled(self.run_data.datasets(names), "DATASETS.VAL", "validated on")
        else:
            if not self._warned_val_fallback:
                get_logger("data").warning(VAL_FALLBACK_WARNING)
                self._warned_val_fallback = True
            names = [d.name for d in self.run_data.datasets(self.run_data.cfg.DATASETS.TEST) if d.labeled]
            if not names and self.run_data.cfg.DATASETS.TEST:
                get_logger("data").warning("no dataset of DATASETS.TEST has labels: there is no periodic evaluation "
                                           "and no model_best.pth; name a validation split in DATASETS.VAL")
        return self._eval(names, distributed, by_video)

    def test(self, distributed, by_video=False):
        """One loader per dataset of DATASETS.TEST, in order (``by_video``: batches of
        videos with all their sentences; ``loader.dataset.by_query`` is the queries' dataset)."""
        return self._eval(self.run_data.cfg.DATASETS.TEST, distributed, by_video)

    def _eval(self, names, distributed, by_video=False):
        loaders = []
        for dataset in self.run_data.datasets(names):
            key = (dataset.name, distributed, by_video)
            if key not in self._evals:
                source = VideoGroups([dataset]) if by_video else dataset
                self._evals[key] = self._loader(source, "TEST.BATCH_SIZE", False, distributed, by_video)
            loaders.append(self._evals[key])
        return loaders


def unlabeled_message(name, key, what):
    return (f"dataset {name!r} ({key}) has no labels (its annotation file has no relevant_windows: a split whose "
            f"labels are held back, as QVHighlights' test); it cannot be {what}, only evaluated by tan-test into a "
            f"submission file (docs/metric.md §6.3)")


def _refuse_unlabeled(datasets, key, what):
    for dataset in datasets:
        if not dataset.labeled:
            raise TanError(unlabeled_message(dataset.name, key, what))


def loader_without(loader, queries):
    """An evaluation ``loader`` (of one dataset's queries, or of its videos with their sentences)
    without the given ``queries`` (indices of its dataset), batched, shared among the processes and
    collated as it was; None when nothing is left. Items keep their dataset's indices."""
    skip = {int(q) for q in queries}
    dataset, sampler = loader.dataset, loader.sampler
    if isinstance(dataset, VideoGroups):
        subset, order = dataset.without(skip), None
        if not len(subset):
            return None
    else:
        kept = np.asarray([i for i in range(len(dataset)) if i not in skip], dtype=np.int64)
        if not len(kept):
            return None
        subset = Subset(dataset, kept.tolist())
        # the order the loader had, over the positions of the queries kept
        order = (np.argsort(-dataset.durations[kept].astype(np.float64), kind="stable")
                 if sampler.order is not None else None)
    new = ResumableDistributedSampler(subset, sampler.num_replicas, sampler.rank, False, sampler.seed,
                                      sampler.batch_size, order=order)
    return DataLoader(subset, batch_size=loader.batch_size, sampler=new, num_workers=loader.num_workers,
                      collate_fn=loader.collate_fn, pin_memory=loader.pin_memory)


def longest_first(dataset):
    """Evaluation order of a clip input that asks for it (videos of different lengths):
    the longest first (stable: ties in the dataset's order), so a batch holds videos of
    similar lengths and little padding."""
    return np.argsort(-dataset.durations.astype(np.float64), kind="stable")


class KeyedConcatDataset(ConcatDataset):
    """A ConcatDataset that also takes the samplers' (index, epoch) keys."""

    def __getitem__(self, key):
        if not isinstance(key, tuple):
            return super().__getitem__(key)
        index, epoch = key
        part = bisect.bisect_right(self.cumulative_sizes, index)
        return self.datasets[part][(index - (self.cumulative_sizes[part - 1] if part else 0), epoch)]


def per_process_batch(cfg, key, world_size):
    """Each process's share of a global batch size ("SOLVER.BATCH_SIZE" or "TEST.BATCH_SIZE");
    an error when the processes cannot share it equally."""
    section, name = key.split(".")
    total = cfg[section][name]
    if total % world_size:
        raise TanError(f"{key} = {total} is a global batch size and must be divisible by the number of "
                       f"processes ({world_size})")
    return total // world_size


def check_batch_sizes(cfg, world_size):
    """Both global batch sizes, checked at set-up before any work."""
    for key in ("SOLVER.BATCH_SIZE", "TEST.BATCH_SIZE"):
        per_process_batch(cfg, key, world_size)
