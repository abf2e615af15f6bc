"""``make_data_loader``: config -> datasets -> samplers -> loaders."""
import functools
import os

import torch
from torch.utils.data import ConcatDataset, DataLoader

from ..errors import TanError
from ..utils import comm
from ..utils.logger import get_logger
from .annotations import load_annotations
from .catalog import DatasetCatalog, resolve_path
from .collate import BatchCollator
from .dataset import MomentDataset
from .samplers import ResumableDistributedSampler
from .synthetic import ensure_synthetic
from .text import Vocabulary, cached_word_vectors, tokenize

_GENERATORS = {"synthetic": ensure_synthetic}


def _configured_names(cfg):
    return list(dict.fromkeys(cfg.DATASETS.TRAIN + cfg.DATASETS.VAL + cfg.DATASETS.TEST))


def _lookup(cfg, names):
    """Catalog entries of ``names`` (with DATASETS.CATALOG registered first)."""
    if cfg.DATASETS.CATALOG:
        DatasetCatalog.register_file(resolve_path(cfg.DATASETS.ROOT, cfg.DATASETS.CATALOG))
    return [DatasetCatalog.get(name, cfg.DATASETS.ROOT) for name in names]


def _catalog_entries(cfg, names):
    """Catalog entries of ``names``, with generated datasets written if missing."""
    entries = _lookup(cfg, names)
    generators = {e["generator"] for e in entries if e.get("generator")}
    if generators:
        # One process writes generated files; the others wait for them.
        if comm.is_main_process():
            for g in sorted(generators):
                _GENERATORS[g](cfg.DATASETS.ROOT)
        comm.synchronize()
    return entries


@functools.lru_cache(maxsize=2)
def _vocabulary(path, dim, annotation_files, file_stamp, cache_dir):
    """Vectors of every word of the configured datasets, read once per process.

    The main process reads the text file (or the cache) first and writes the
    cache; the others wait for it and then read the cache."""
    words = set()
    for annotations, fmt, durations in annotation_files:
        queries, _ = load_annotations(annotations, fmt, durations)
        for q in queries:
            words.update(tokenize(q.sentence))
    if comm.is_main_process():
        vectors = cached_word_vectors(path, words, dim, cache_dir)
    comm.synchronize()
    if not comm.is_main_process():
        vectors = cached_word_vectors(path, words, dim, cache_dir)
    get_logger("data").info("word vectors: %d of %d words found in %s", len(vectors), len(words), path)
    return Vocabulary(vectors, dim)


def word_vector_cache_dir(cfg):
    """DATASETS.CACHE_DIR (relative to DATASETS.ROOT), or OUTPUT_DIR/cache where that cannot be written."""
    folder = resolve_path(cfg.DATASETS.ROOT, cfg.DATASETS.CACHE_DIR)
    try:
        os.makedirs(folder, exist_ok=True)
        if os.access(folder, os.W_OK):
            return folder
    except OSError:
        pass
    return os.path.join(cfg.OUTPUT_DIR, "cache")


def build_vocabulary(cfg):
    entries = _catalog_entries(cfg, _configured_names(cfg))
    files = tuple(sorted({(e["annotations"], e["format"], e.get("durations")) for e in entries}, key=str))
    path = resolve_path(cfg.DATASETS.ROOT, cfg.INPUT.WORD_VECTORS)
    stamp = (os.stat(path).st_mtime_ns, os.stat(path).st_size) if os.path.isfile(path) else None
    return _vocabulary(path, cfg.INPUT.PRE_QUERY_SIZE, files, stamp, word_vector_cache_dir(cfg))


def check_data_files(cfg):
    """Fail before any work if a configured dataset's files or the word-vector file are missing."""
    entries = _lookup(cfg, _configured_names(cfg))
    for entry in entries:
        if entry.get("generator"):
            continue  # written on first use
        for key in ("annotations", "features", "durations"):
            if entry.get(key) and not os.path.isfile(entry[key]):
                raise TanError(f"dataset {entry['name']!r}: {key} file {entry[key]!r} not found "
                               f"(DATASETS.ROOT is {cfg.DATASETS.ROOT!r}; see README 'Real data')")
    if entries and not all(e.get("generator") for e in entries):
        path = resolve_path(cfg.DATASETS.ROOT, cfg.INPUT.WORD_VECTORS)
        if not os.path.isfile(path):
            raise TanError(f"word-vector file {path!r} not found (INPUT.WORD_VECTORS, relative to DATASETS.ROOT). "
                           f"Put a GloVe text file there, e.g. glove.840B.300d.txt, or set INPUT.WORD_VECTORS.")


def build_datasets(cfg, names):
    if not names:
        raise TanError("no dataset named; set DATASETS.TRAIN / DATASETS.TEST")
    vocabulary = build_vocabulary(cfg)
    datasets = []
    for entry in _catalog_entries(cfg, names):
        datasets.append(MomentDataset(
            entry["name"], entry["annotations"], entry["features"], entry["format"], vocabulary,
            cfg.INPUT.NUM_PRE_CLIPS, cfg.MODEL.TAN.FEATPOOL.INPUT_SIZE,
            feature_key=entry.get("feature_key", "c3d_features"), cache_size=cfg.INPUT.FEATURE_CACHE_SIZE,
            durations=entry.get("durations")))
    return datasets


def _per_process_batch(total, key):
    world = comm.get_world_size()
    if total % world:
        raise TanError(f"{key} = {total} is a global batch size and must be divisible by the number of "
                       f"processes ({world})")
    return total // world


def _loader(cfg, dataset, batch_size, shuffle, is_distributed):
    world, rank = (comm.get_world_size(), comm.get_rank()) if is_distributed else (1, 0)
    # One sampler for one or many processes: shuffled from SEED and the epoch
    # (set_epoch), so a resumed run sees the same order as an uninterrupted one.
    sampler = ResumableDistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=shuffle, seed=cfg.SEED)
    workers = cfg.DATALOADER.NUM_WORKERS
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, num_workers=workers,
                      collate_fn=BatchCollator(), pin_memory=torch.cuda.is_available(),
                      persistent_workers=workers > 0)


def make_data_loader(cfg, is_train=True, is_distributed=False, is_for_period=False):
    """Training: one loader over the concatenated DATASETS.TRAIN. Otherwise a list
    of loaders, one per dataset of DATASETS.TEST, or of DATASETS.VAL (falling
    back to TEST) when ``is_for_period``."""
    if is_train:
        datasets = build_datasets(cfg, cfg.DATASETS.TRAIN)
        dataset = datasets[0] if len(datasets) == 1 else ConcatDataset(datasets)
        batch = _per_process_batch(cfg.SOLVER.BATCH_SIZE, "SOLVER.BATCH_SIZE")
        return _loader(cfg, dataset, batch, True, is_distributed)
    names = cfg.DATASETS.TEST
    if is_for_period and cfg.DATASETS.VAL:
        names = cfg.DATASETS.VAL
    elif is_for_period:
        get_logger("data").warning("DATASETS.VAL is empty: evaluating DATASETS.TEST during training "
                                   "(the reference's habit; select epochs on a validation split instead)")
    batch = _per_process_batch(cfg.TEST.BATCH_SIZE, "TEST.BATCH_SIZE")
    return [_loader(cfg, d, batch, False, is_distributed) for d in build_datasets(cfg, names)]
