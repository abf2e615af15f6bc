"""Datasets that are written on first use (a catalog entry's "generator"), and
the folder where prepared data is cached."""
import os

from ..utils import comm
from .catalog import DatasetCatalog, resolve_path
from .synthetic import ensure_synthetic

GENERATORS = {"synthetic": ensure_synthetic}
ALL_SPLITS = ("TRAIN", "VAL", "TEST")  # the config's dataset lists


def write_generated(catalog, entries, done=()):
    """Write the generated datasets among catalog ``entries`` (those of generators not in
    ``done``) if missing: the main process writes, the others wait. Returns the generators run."""
    generators = sorted({e["generator"] for e in entries if e.get("generator")} - set(done))
    if not generators:
        return set()
    if comm.is_main_process():
        for name in generators:
            GENERATORS[name](catalog.root)
    comm.synchronize()
    return set(generators)


def write_configured(cfg):
    """Write the generated datasets that ``cfg`` names (DATASETS.TRAIN, VAL and TEST)."""
    catalog = DatasetCatalog.from_config(cfg)
    write_generated(catalog, [catalog.get(name) for split in ALL_SPLITS for name in cfg.DATASETS[split]])


def cache_dir(cfg):
    """DATASETS.CACHE_DIR (relative to DATASETS.ROOT), or OUTPUT_DIR/cache where that cannot be written."""
    folder = resolve_path(cfg.DATASETS.ROOT, cfg.DATASETS.CACHE_DIR)
    try:
        os.makedirs(folder, exist_ok=True)
        if os.access(folder, os.W_OK):
            return folder
    except OSError:
        pass
    return os.path.join(cfg.OUTPUT_DIR, "cache")
