"""The experiment files of chenjoya/2dtan (model TAN) and MCG-NJU/MMN (model MMN), for
tan-convert-config (docs/configs.md).

Their keys are tan's, so their files load as they are; but as tan configs they
evaluate as tan does by default, by windows over the videos longer than the
training ones, where their code scores every video whole. A file is one of
theirs when its architecture is the reference's and every key it sets is a key
of the reference's own config (its ``config/defaults.py``); tan's own configs
set keys of tan's (DATASETS.VAL, SEED, TEST.WINDOW, ...) and are not converted.
The conversion keeps every setting, writes the reference's default where it
differs from tan's and the file leaves the key out, and leaves out the keys
tan has no place for; tan-convert-config adds the reference's evaluation.
"""
from typing import NamedTuple

from ...config.experiment_file import DEFAULTS_TAKEN
from ...config.models import ForeignConfig

# The keys both references' configs share (their config/defaults.py).
_COMMON = ("MODEL.DEVICE", "MODEL.ARCHITECTURE", "INPUT.NUM_PRE_CLIPS", "DATASETS.TRAIN", "DATASETS.TEST",
           "DATALOADER.NUM_WORKERS", "SOLVER.MAX_EPOCH", "SOLVER.LR", "SOLVER.CHECKPOINT_PERIOD", "SOLVER.TEST_PERIOD",
           "SOLVER.BATCH_SIZE", "SOLVER.MILESTONES", "TEST.BATCH_SIZE", "TEST.NMS_THRESH", "OUTPUT_DIR",
           "PATHS_CATALOG")
_MAP = ("NUM_CLIPS", "FEATPOOL.INPUT_SIZE", "FEATPOOL.HIDDEN_SIZE", "FEATPOOL.KERNEL_SIZE", "FEAT2D.POOLING_COUNTS",
        "PREDICTOR.HIDDEN_SIZE", "PREDICTOR.KERNEL_SIZE", "PREDICTOR.NUM_STACK_LAYERS", "LOSS.MIN_IOU", "LOSS.MAX_IOU")

# Keys of theirs that tan has no place for, and why nothing is lost.
_NOT_CARRIED = {"PATHS_CATALOG": "PATHS_CATALOG: tan reads the built-in dataset names under DATASETS.ROOT, and "
                                 "other names from a DATASETS.CATALOG file (docs/data.md)"}


def _flat_keys(data, prefix=""):
    """"A.B.C" of every value of nested mappings (a mapping that is empty or None is a value)."""
    for key, value in data.items():
        if isinstance(value, dict) and value:
            yield from _flat_keys(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}"


def _plain(value):
    """Nested mappings as plain dicts, for the written file."""
    return {k: _plain(v) for k, v in value.items()} if isinstance(value, dict) else value


def _set(config, key, value):
    *sections, last = key.split(".")
    node = config
    for section in sections:
        node = node.setdefault(section, {})
    node[last] = value


class ReferenceKeys(NamedTuple):
    """The files of ``reference`` (its repository) for tan's model ``architecture``: ``keys``, every
    key of its config; ``defaults``, its defaults that tan's differ from ({key: value})."""
    reference: str
    architecture: str
    keys: frozenset
    defaults: dict

    def recognises(self, data):
        model = data.get("MODEL")
        if not isinstance(model, dict):
            return False
        # its code takes its own architecture when the file names none
        if model.get("ARCHITECTURE", self.architecture) != self.architecture:
            return False
        if "ARCHITECTURE" not in model and self.architecture not in model:
            return False
        return set(_flat_keys(data)) <= self.keys

    def convert(self, data, path):
        """The ForeignConfig of ``data`` (read from ``path``), or None when it is not one of its files."""
        if not self.recognises(data):
            return None
        given = set(_flat_keys(data))
        config = {k: _plain(v) for k, v in data.items() if k not in _NOT_CARRIED}
        config["MODEL"] = dict(config["MODEL"], ARCHITECTURE=self.architecture)
        notes = [f"its keys are tan's: the file also loads as it is, but then evaluates as tan does by default "
                 f"(docs/long_videos.md); converted, it evaluates as {self.reference} does",
                 "DATASETS: its dataset names are tan's built-in ones, read in tan's layout under DATASETS.ROOT "
                 "(docs/datasets.md; tan-convert-config --data-root DIR)"]
        taken = []
        for key, value in self.defaults.items():
            if key not in given:
                _set(config, key, value)
                taken.append(f"{key} {value!r}")
        if taken:
            notes.append(f"{DEFAULTS_TAKEN}: {', '.join(taken)}")
        notes += [note for key, note in _NOT_CARRIED.items() if key in data]
        return ForeignConfig(config, None, tuple(notes))


CHENJOYA = ReferenceKeys("chenjoya/2dtan", "TAN", frozenset(
    _COMMON + ("MODEL.WEIGHT", "INPUT.PRE_QUERY_SIZE")
    + tuple(f"MODEL.TAN.{k}" for k in _MAP + ("INTEGRATOR.QUERY_HIDDEN_SIZE", "INTEGRATOR.LSTM.NUM_LAYERS",
                                              "INTEGRATOR.LSTM.BIDIRECTIONAL"))), {})

MMN = ReferenceKeys("MCG-NJU/MMN", "MMN", frozenset(
    _COMMON + ("DATASETS.NAME", "SOLVER.RESUME", "SOLVER.RESUME_EPOCH", "SOLVER.FREEZE_BERT", "SOLVER.ONLY_IOU",
               "SOLVER.SKIP_TEST", "TEST.CONTRASTIVE_SCORE_POW")
    + tuple(f"MODEL.MMN.{k}" for k in _MAP + (
        "JOINT_SPACE_SIZE", "FEAT2D.NAME", "TEXT_ENCODER.NAME", "LOSS.BCE_WEIGHT", "LOSS.NUM_POSTIVE_VIDEO_PROPOSAL",
        "LOSS.NEGATIVE_VIDEO_IOU", "LOSS.SENT_REMOVAL_IOU", "LOSS.PAIRWISE_SENT_WEIGHT", "LOSS.CONTRASTIVE_WEIGHT",
        "LOSS.TAU_VIDEO", "LOSS.TAU_SENT", "LOSS.MARGIN"))),
    {"TEST.NMS_THRESH": 0.5})  # tan's default is chenjoya/2dtan's 0.4
