"""Datasets that are written on first use (a catalog entry's "generator"), and
the folder where prepared data is cached.

A generator is registered by the package that provides it, so that the
library runs it without depending on it: by ``register_generator`` when its
module is imported (every tan command imports the built-in synthetic
dataset's, tan_apps/synthetic), or, for a program that imports the library
alone, through the ``tan.dataset_generators`` entry points of the installed
packages (tan's own pyproject.toml names the synthetic dataset's)."""
import os
from importlib.metadata import entry_points

from ..errors import TanError
from ..utils import comm
from ..utils.registry import Registry
from .catalog import DatasetCatalog, resolve_path

# name -> fn(root): writes the dataset under DATASETS.ROOT unless a complete copy is there
GENERATORS = Registry("dataset generator")
register_generator = GENERATORS.register
ALL_SPLITS = ("TRAIN", "VAL", "TEST")  # the config's dataset lists


def write_generated(catalog, entries, done=()):
    """Write the generated datasets among catalog ``entries`` (those of generators not in
    ``done``) if missing: the main process writes, the others wait. Returns the generators run."""
    generators = sorted({e["generator"] for e in entries if e.get("generator")} - set(done))
    if not generators:
        return set()
    missing = [name for name in generators if name not in GENERATORS and not _load_entry_point(name)]
    if missing:
        raise TanError(f"the datasets of generator(s) {', '.join(map(repr, missing))} are written on first use, but no "
                       f"imported module registers that generator and no installed package names it (entry points "
                       f"'tan.dataset_generators'): the tan commands register the built-in 'synthetic'; from "
                       f"Python, import tan_apps.synthetic first")
    if comm.is_main_process():
        for name in generators:
            GENERATORS.get(name)(catalog.root)
    comm.synchronize()
    return set(generators)


def _load_entry_point(name):
    """Register generator ``name`` from an installed package's ``tan.dataset_generators`` entry
    point; whether one was found."""
    for point in entry_points(group="tan.dataset_generators", name=name):
        generator = point.load()  # importing its module may register it already
        if name not in GENERATORS:
            register_generator(name)(generator)
        return True
    return False


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
