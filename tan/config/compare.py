"""What changed between two configs, and whether a change can alter a result.

A training folder's config.yml says what its checkpoints were trained with;
a run that continues the folder compares its config with that file before
writing anything (tan/engine/setup.py). Keys listed here decide only how or
where the work runs, never what is learned or measured: they may change
between the runs of one folder; so may the keys that the run's model lists
in its RUNTIME_KEYS. Every other key is guarded.
"""
from typing import Any, NamedTuple

from .models import MODELS

# Where files are found, how fast and on what the work runs, what is logged
# and how often checkpoints are kept: the trained weights and the test
# metrics are the same whatever these say (up to floating-point rounding for
# the device and the kernel choices: the same arithmetic, in another order).
# DATASETS.CATALOG and INPUT.WORD_VECTORS are paths too, but they choose
# which files are read, so they are guarded; DATASETS.ROOT only says where.
RUNTIME_KEYS = (
    "OUTPUT_DIR",  # a moved or copied run folder
    "PLUGINS",  # where the code is found; MODEL.ARCHITECTURE says which model
    "DATASETS.ROOT",  # the same files, elsewhere
    "DATASETS.CACHE_DIR",
    "INPUT.FEATURE_CACHE_SIZE",
    "DATALOADER.NUM_WORKERS",
    "TEST.BATCH_SIZE",  # inference is per query; the batch only groups them
    "TEST.WINDOW.BATCH",  # windows are scored one by one; the batch only groups them
    "SOLVER.LOG_PERIOD",
    "SOLVER.CHECKPOINT_PERIOD",
    "TENSORBOARD",
    "DISTRIBUTED.TIMEOUT",
    "MODEL.DEVICE",
    "MODEL.CHANNELS_LAST",
    "SOLVER.RESUME",  # reference codes' keys, accepted and unused: tan always resumes from OUTPUT_DIR
    "SOLVER.RESUME_EPOCH",
    "DATASETS.NAME",  # a label
    "SOLVER.COMPILE",
    "CUDNN_BENCHMARK",
    "CPU_KEEP_FREED_MEMORY",
)
# Not here, though they are switches too: SOLVER.AMP and TF32 change the
# precision of the arithmetic, and with it the weights, beyond rounding;
# TEST.NMS_UNITS, like TEST.NMS_THRESH, changes which moments the NMS keeps,
# and with them the R@5 figures (docs/metric.md §2).


class Change(NamedTuple):
    key: str
    old: Any
    new: Any
    runtime: bool = False  # a key that never changes a result (RUNTIME_KEYS, the model's RUNTIME_KEYS)

    @property
    def affects_results(self):
        return not self.runtime

    def __str__(self):
        return f"{self.key}: {self.old!r} -> {self.new!r}"


def runtime_keys(*cfgs):
    """RUNTIME_KEYS and, for the model of each of ``cfgs``, its own (as full keys)."""
    keys = set(RUNTIME_KEYS)
    for cfg in cfgs:
        name = cfg.MODEL.ARCHITECTURE
        if name in MODELS:
            keys.update(f"MODEL.{name}.{key}" for key in MODELS.get(name).RUNTIME_KEYS)
    return keys


def flatten(cfg, prefix=""):
    """{"SOLVER.LR": 0.01, ...}: every leaf of a (yacs) config, lists as lists."""
    values = {}
    for name, value in cfg.items():
        if isinstance(value, dict):
            values.update(flatten(value, f"{prefix}{name}."))
        else:
            values[prefix + name] = list(value) if isinstance(value, (list, tuple)) else value
    return values


def config_changes(old, new):
    """The keys whose values differ between configs ``old`` and ``new``, sorted."""
    a, b = flatten(old), flatten(new)
    runtime = runtime_keys(old, new)
    return [Change(key, a.get(key), b.get(key), key in runtime) for key in sorted(set(a) | set(b))
            if a.get(key) != b.get(key)]
