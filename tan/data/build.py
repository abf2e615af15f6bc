"""The data of one run, built once from the config: catalog entries -> parsed
annotations -> vocabulary -> datasets -> samplers -> loaders.

A run makes one :class:`RunData` and asks it for what it needs; each piece is
built on first use and kept, so an annotation file is parsed once, and the
datasets that periodic evaluation uses are those of the final test.
``make_data_loader`` and ``build_datasets`` are the one-call forms, each over
a fresh ``RunData``.
"""
import os

import numpy as np

from ..config.architecture import feature_size
from ..config.models import declarations
from ..errors import TanError
from ..utils.logger import get_logger
from . import formats
from .catalog import DatasetCatalog, field_paths
from .dataset import FeatureSettings, MomentDataset
from .features.provenance import differences, read_extractor, same_extractor
from .features.sources import streams_of
from .generated import ALL_SPLITS, write_generated
from .loaders import RunLoaders, check_batch_sizes, unlabeled_message
from .overlap import overlap_warnings, run_overlaps
from .text.inputs import text_input_class
from .training_windows import TrainingWindows

def _file_key(entry):
    """What load_annotations reads: two names over one file share its parse."""
    return entry["annotations"], entry["format"], entry.get("durations")


class RunData:
    """Datasets, vocabulary and loaders of one run: the datasets of ``splits``
    (DATASETS.TRAIN + VAL + TEST for training; TEST alone for evaluation, so
    that it needs no training file).

    Construction only resolves the configured names in the catalog (so an
    unknown name fails at once); files are read on first use and kept. The
    vocabulary holds the words of these datasets only: it selects which rows
    of the word-vector file are read, so a word's vector is the same whichever
    splits a run holds."""

    def __init__(self, cfg, catalog=None, splits=ALL_SPLITS, extra=(), declared=None):
        """``extra``: more dataset names (of the catalog) to hold beside those of ``splits``;
        ``declared``: the model's :class:`tan.config.models.Declarations` when the caller has them."""
        self.cfg = cfg
        self.catalog = catalog if catalog is not None else DatasetCatalog.from_config(cfg)
        self.splits = tuple(splits)
        self.names = list(dict.fromkeys([name for split in self.splits for name in cfg.DATASETS[split]]
                                        + list(extra)))
        self._entries = {name: self.catalog.get(name) for name in self.names}
        self._generated = set()  # generators already run (or checked) by this run
        self._parsed = {}  # _file_key -> (queries, dropped)
        self.declared = declared if declared is not None else declarations(cfg)  # asked once for the whole run
        self.train_windows = TrainingWindows.from_config(cfg)
        self._trained_span = None  # (the span,) once measured: the span may itself be None
        if self.train_windows is not None and self.declared.clip_input.variable_length:
            raise TanError(f"INPUT.TRAIN_WINDOW.LENGTH {cfg.INPUT.TRAIN_WINDOW.LENGTH}: MODEL.ARCHITECTURE "
                           f"{cfg.MODEL.ARCHITECTURE!r} already trains on windows of its own clips "
                           f"({self.declared.clip_input.describe()}); set INPUT.TRAIN_WINDOW.LENGTH to 0")
        if self.train_windows is not None and self.train_windows.negatives and self.declared.batches_by_video:
            raise TanError(f"INPUT.TRAIN_WINDOW.NEGATIVES {self.train_windows.negatives}: MODEL.ARCHITECTURE "
                           f"{cfg.MODEL.ARCHITECTURE!r} trains on batches of videos with their sentences, whose "
                           f"loss needs each sentence's moment in the window; set INPUT.TRAIN_WINDOW.NEGATIVES to 0")
        ranked = cfg.INPUT.TRAIN_WINDOW.RANKED_WINDOWS
        if ranked and self.train_windows is None and not self.declared.clip_input.variable_length:
            raise TanError(f"INPUT.TRAIN_WINDOW.RANKED_WINDOWS {ranked}: the windows of a video are ranked in training "
                           f"by windows; set INPUT.TRAIN_WINDOW.LENGTH (MODEL.ARCHITECTURE "
                           f"{cfg.MODEL.ARCHITECTURE!r} takes whole videos)")
        choice = self.declared.text_input
        self.text_input = text_input_class(choice)(self, choice)  # how the datasets encode sentences
        self._datasets = {}
        self.loaders = RunLoaders(self)

    def entry(self, name):
        """The catalog entry of ``name`` (absolute paths); names outside the config are looked up too."""
        if name not in self._entries:
            self._entries[name] = self.catalog.get(name)
        return dict(self._entries[name])

    def named_files(self, entry):
        """(field, path) of every file or folder that this run reads for catalog ``entry``; an
        error when the run's text input needs a file that the entry does not name."""
        files = [(key, path) for key in ("annotations", "features", "durations") for path in field_paths(entry.get(key))]
        return files + self.text_input.dataset_files(entry)

    def check_before_work(self):
        """What set-up checks before it joins the process group or writes anything: the dataset
        files (:meth:`check_files`), what the model needs of the environment (``check_environment``),
        then the text input's own (a tokenizer is read here, once, and kept for the datasets)."""
        self.check_files()
        self.declared.model.check_environment(self.cfg)  # e.g. a missing library, named with the way around it
        self.text_input.prepare()

    def check_with_processes(self, world_size):
        """What set-up checks once the processes are joined: both batch sizes over ``world_size``
        processes, labels where the run trains or validates, and for a training run what its training
        data shares with its evaluation data. Returns the warnings to log (the overlap, if any).
        Reading a generated dataset's annotations writes it first (rank 0; the others wait)."""
        check_batch_sizes(self.cfg, world_size)
        overlaps = run_overlaps(self) if "TRAIN" in self.splits else []
        self.check_labeled()
        return overlap_warnings(overlaps)

    def check_files(self):
        """Fail before any work if a configured dataset's files or the text input's files are missing."""
        for entry in self.entries():
            if entry.get("generator"):
                continue  # written on first use
            for key, path in self.named_files(entry):
                if not os.path.exists(path):
                    what = "file" if key in ("annotations", "durations") else "file or folder"
                    raise TanError(f"dataset {entry['name']!r}: {key} {what} {path!r} not found (DATASETS.ROOT is "
                                   f"{self.cfg.DATASETS.ROOT!r}; see docs/datasets.md, \"Getting the data\")")
        problems = self.text_input.problems()
        if problems:
            raise TanError(problems[0])
        for warning in self.extractor_warnings():
            get_logger("data").warning("%s", warning)

    def extractor_records(self, entry):
        """{"features": [record or None per stream], "text_features": record or None} of catalog ``entry``:
        how its feature folders were made, where tan-extract-features recorded it."""
        streams = [path for path, _ in streams_of(entry["features"], entry.get("feature_key"))]
        text = dict(self.text_input.dataset_files(entry)).get("text_features")  # read by this run's text input
        return {"features": [read_extractor(path) for path in streams],
                "text_features": read_extractor(text) if text else None}

    def extractors(self):
        """The extractor records of the training data (the first of DATASETS.TRAIN), as a checkpoint keeps
        them; None when none of its folders has a record."""
        names = list(self.cfg.DATASETS.TRAIN)
        if not names or not all(os.path.exists(p) for _, p in self.named_files(self.entry(names[0]))):
            return None
        records = self.extractor_records(self.entry(names[0]))
        known = any(r is not None for r in records["features"] + [records["text_features"]])
        return records if known else None  # features made elsewhere: the checkpoint says nothing

    def extractor_warnings(self):
        """A message for each feature stream (and the sentence features) that this run's datasets
        took from different extractors: a model trained on one kind of row and tested on another."""
        seen, warnings = {}, []
        for entry in self.entries():
            if entry.get("generator") or not all(os.path.exists(p) for _, p in self.named_files(entry)):
                continue
            records = self.extractor_records(entry)
            slots = [(f"feature stream {i + 1}", r) for i, r in enumerate(records["features"])]
            for slot, record in slots + [("sentence features", records["text_features"])]:
                if record is None:
                    continue
                first = seen.setdefault(slot, (entry["name"], record))
                if not same_extractor(first[1], record):
                    warnings.append(f"datasets {first[0]!r} and {entry['name']!r} have {slot} made by different "
                                    f"extractors ({'; '.join(differences(first[1], record))}): the model will be "
                                    f"tested on rows of another kind than it was trained on")
        return warnings

    def prepare(self):
        """Write the configured generated datasets (synthetic) if missing."""
        self._generate(self.entries())

    def _generate(self, entries):
        self._generated.update(write_generated(self.catalog, entries, self._generated))

    def queries(self, name):
        """(queries, dropped Counter) of ``name``'s annotation file, parsed once per run.

        Shared by every caller: read them, do not change them."""
        return self._parse(self.entry(name))

    def trained_span(self):
        """What the training videos (DATASETS.TRAIN) last as the model takes them in (whole, by the
        windows of its clip input or by INPUT.TRAIN_WINDOW), for windowed grounding of longer videos
        (tan.engine.long_videos.windows): {"median": s, "longest": s, "videos": n}, the longest a video that
        evaluation may score whole (ClipInput.whole_seconds); None without training
        datasets. Read from the annotations alone, once a run (the checkpointer, the periodic
        evaluation and the test each ask)."""
        if self._trained_span is None:
            self._trained_span = (self._measured_span(),)
        return self._trained_span[0]

    def _measured_span(self):
        durations = {}
        for name in self.cfg.DATASETS.TRAIN:
            for query in self.queries(name)[0]:
                durations.setdefault((name, query.video), float(query.duration))
        if not durations:
            return None
        clips, windows = self.declared.clip_input, self.train_windows
        seconds = np.asarray([windows.trained_seconds(d) if windows else clips.trained_seconds(d)
                              for d in durations.values()], dtype=np.float64)
        # the longest is what evaluation may score whole: the window of a run trained by windows, but the
        # whole video for a model that trains on windows of its own rows and reads whole videos
        whole = [windows.trained_seconds(d) if windows else clips.whole_seconds(d) for d in durations.values()]
        return {"median": round(float(np.median(seconds)), 4), "longest": round(float(max(whole)), 4),
                "videos": len(seconds)}

    def check_labeled(self):
        """Refuse a dataset without labels (tan.data.formats.Query.labeled) in DATASETS.TRAIN or VAL."""
        for key in ("TRAIN", "VAL"):
            for name in self.cfg.DATASETS[key] if key in self.splits else ():
                queries = self.queries(name)[0]
                if queries and not all(q.labeled for q in queries):
                    raise TanError(unlabeled_message(name, f"DATASETS.{key}", "trained or validated on"))

    def annotation_key(self, name):
        """What ``name``'s queries are read from (file, format, durations file): equal keys, the same queries."""
        return _file_key(self.entry(name))

    def _parse(self, entry):
        key = _file_key(entry)
        if key not in self._parsed:
            self._generate([entry])
            self._parsed[key] = formats.load_annotations(*key)
        return self._parsed[key]

    def parsed_files(self):
        """The queries of each annotation file of this run's datasets (each file once, in a fixed order)."""
        self.prepare()
        entries = {_file_key(entry): entry for entry in self.entries()}
        return [self._parse(entries[key])[0] for key in sorted(entries, key=str)]

    def dataset(self, name):
        """The MomentDataset of ``name``, built once per run."""
        if name not in self.names:  # its words would be missing from the vocabulary
            raise TanError(f"dataset {name!r} is not one of this run's datasets ({', '.join(self.names) or 'none'}; "
                           f"DATASETS.{'/'.join(self.splits)})")
        if name not in self._datasets:
            text = self.text_input.encoder(name)
            entry = self.entry(name)
            self._datasets[name] = MomentDataset(entry["name"], self._parse(entry), self.feature_settings(entry), text,
                                                 source=entry["annotations"], annotation_format=entry["format"])
        return self._datasets[name]

    def feature_settings(self, entry):
        """How the datasets read catalog ``entry``'s features (the config's sizes and limits)."""
        cfg = self.cfg
        input_size, input_size_key = feature_size(cfg, self.declared.model)
        return FeatureSettings(entry["features"], entry.get("feature_key"), self.declared.clip_input,
                               input_size, input_size_key, cfg.INPUT.FEATURE_CACHE_SIZE,
                               cfg.INPUT.FEATURE_LENGTH_TOLERANCE, cfg.SEED, self.train_windows,
                               cfg.INPUT.TRAIN_WINDOW.RANKED_WINDOWS)

    def datasets(self, names):
        """The datasets of ``names``, in order; every name is looked up before any is built."""
        if not names:
            raise TanError("no dataset named; set DATASETS.TRAIN / DATASETS.TEST")
        for name in names:
            self.entry(name)
        return [self.dataset(name) for name in names]

    def train_loader(self, distributed, by_video=False):
        """One shuffled loader over the concatenated DATASETS.TRAIN (:meth:`RunLoaders.train`)."""
        return self.loaders.train(distributed, by_video)

    def val_loaders(self, distributed, by_video=False):
        """Loaders of DATASETS.VAL, or of DATASETS.TEST when VAL is empty (:meth:`RunLoaders.val`)."""
        return self.loaders.val(distributed, by_video)

    def test_loaders(self, distributed, by_video=False):
        """One loader per dataset of DATASETS.TEST (:meth:`RunLoaders.test`)."""
        return self.loaders.test(distributed, by_video)

    def entries(self):
        """The catalog entries of this run's datasets, in order."""
        return [self._entries[name] for name in self.names]


def build_datasets(cfg, names):
    """The datasets of ``names`` (with the vocabulary of the configured datasets and of ``names``)."""
    return RunData(cfg, extra=names).datasets(names)


def make_data_loader(cfg, is_train=True, is_distributed=False, is_for_period=False):
    """Training: one loader over the concatenated DATASETS.TRAIN. Otherwise a list
    of loaders, one per dataset of DATASETS.TEST, or of DATASETS.VAL (falling
    back to TEST) when ``is_for_period``. Each call builds everything anew: a
    run that needs several should hold one :class:`RunData` instead."""
    data = RunData(cfg)
    if is_train:
        return data.train_loader(is_distributed)
    return data.val_loaders(is_distributed) if is_for_period else data.test_loaders(is_distributed)
