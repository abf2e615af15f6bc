"""The data of one run, built once from the config: catalog entries -> parsed
annotations -> vocabulary -> datasets -> samplers -> loaders.

A run makes one :class:`RunData` and asks it for what it needs; each piece is
built on first use and kept, so an annotation file is parsed once, and the
datasets that periodic evaluation uses are those of the final test.
``make_data_loader`` and ``build_datasets`` are the one-call forms, each over
a fresh ``RunData``.
"""
import os

import torch
from torch.utils.data import ConcatDataset, DataLoader

from ..config.architecture import model_key, model_settings, text_encoder_name
from ..errors import TanError, UnknownVideoError
from ..utils import comm
from ..utils.logger import get_logger
from . import annotations
from .catalog import DatasetCatalog, resolve_path
from .collate import BatchCollator, VideoBatchCollator
from .dataset import MomentDataset
from .feature_sources import open_features
from .samplers import ResumableDistributedSampler
from .sentence_features import SentenceFeatures
from .synthetic import ensure_synthetic
from .text import Vocabulary, cached_word_vectors, tokenize
from .video_groups import VideoGroups
from .word_pieces import WordPieces

_GENERATORS = {"synthetic": ensure_synthetic}

VAL_FALLBACK_WARNING = (
    "DATASETS.VAL is empty: periodic evaluation and model_best.pth use DATASETS.TEST (the reference's habit), "
    "so the best model's test figures are optimistic; select epochs on a validation split, or report the "
    "final model's figures")


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


def _paths(value):
    """A catalog field's paths as a list: none, one, or the list of feature streams."""
    return [] if not value else [value] if isinstance(value, str) else list(value)


def _describe(paths):
    """A catalog entry's features for a message: one path, or the streams joined by " + "."""
    return " + ".join(_paths(paths))


def _exists(paths):
    """Whether every path (one, or a list of feature streams) is on disk, as a file or a folder."""
    return all(os.path.exists(p) for p in _paths(paths))


def _file_key(entry):
    """What load_annotations reads: two names over one file share its parse."""
    return entry["annotations"], entry["format"], entry.get("durations")


ALL_SPLITS = ("TRAIN", "VAL", "TEST")


class RunData:
    """Datasets, vocabulary and loaders of one run: the datasets of ``splits``
    (DATASETS.TRAIN + VAL + TEST for training; TEST alone for evaluation, so
    that it needs no training file).

    Construction only resolves the configured names in the catalog (so an
    unknown name fails at once); files are read on first use and kept. The
    vocabulary holds the words of these datasets only: it selects which rows
    of the word-vector file are read, so a word's vector is the same whichever
    splits a run holds."""

    def __init__(self, cfg, catalog=None, splits=ALL_SPLITS, extra=()):
        """``extra``: more dataset names (of the catalog) to hold beside those of ``splits``."""
        self.cfg = cfg
        self.catalog = catalog if catalog is not None else DatasetCatalog.from_config(cfg)
        self.splits = tuple(splits)
        self.names = list(dict.fromkeys([name for split in self.splits for name in cfg.DATASETS[split]]
                                        + list(extra)))
        self._entries = {name: self.catalog.get(name) for name in self.names}
        self._generated = set()  # generators already run (or checked) by this run
        self._parsed = {}  # _file_key -> (queries, dropped)
        self._vocabulary = None
        self._word_pieces = None
        self._datasets = {}
        self._train_loaders = {}  # distributed -> loader
        self._eval_loaders = {}  # (name, distributed) -> loader, shared by validation and test
        self._warned_val_fallback = False

    @property
    def word_vectors_path(self):
        """INPUT.WORD_VECTORS, relative to DATASETS.ROOT unless absolute."""
        return resolve_path(self.cfg.DATASETS.ROOT, self.cfg.INPUT.WORD_VECTORS)

    def entry(self, name):
        """The catalog entry of ``name`` (absolute paths); names outside the config are looked up too."""
        if name not in self._entries:
            self._entries[name] = self.catalog.get(name)
        return dict(self._entries[name])

    def named_files(self, entry):
        """(field, path) of every file or folder that this run reads for catalog ``entry``; an
        error when the run needs sentence features and the entry names no folder of them."""
        files = [(key, path) for key in ("annotations", "features", "durations") for path in _paths(entry.get(key))]
        if self.uses_sentence_features:
            files.append(("text_features", self.text_features_folder(entry)))
        return files

    @property
    def needs_word_vectors(self):
        """Whether this run reads the word-vector file: GloVe sentences, and a dataset that is not generated
        (a generated dataset ships its own vectors)."""
        return (not self.uses_word_pieces and not self.uses_sentence_features
                and any(not self._entries[name].get("generator") for name in self.names))

    def check_files(self):
        """Fail before any work if a configured dataset's files or the word-vector file are missing."""
        entries = [self._entries[name] for name in self.names]
        for entry in entries:
            if entry.get("generator"):
                continue  # written on first use
            for key, path in self.named_files(entry):
                if not os.path.exists(path):
                    what = "file" if key in ("annotations", "durations") else "file or folder"
                    raise TanError(f"dataset {entry['name']!r}: {key} {what} {path!r} not found (DATASETS.ROOT is "
                                   f"{self.cfg.DATASETS.ROOT!r}; see the README's 'Data' section)")
        if self.needs_word_vectors:
            if not os.path.isfile(self.word_vectors_path):
                raise TanError(f"word-vector file {self.word_vectors_path!r} not found (INPUT.WORD_VECTORS, "
                               f"relative to DATASETS.ROOT). Put a GloVe text file there, e.g. "
                               f"glove.840B.300d.txt, or set INPUT.WORD_VECTORS.")

    def prepare(self):
        """Write the configured generated datasets (synthetic) if missing."""
        self._generate([self._entries[name] for name in self.names])

    def _generate(self, entries):
        generators = sorted({e["generator"] for e in entries if e.get("generator")} - self._generated)
        if not generators:
            return
        # One process writes generated files; the others wait for them.
        if comm.is_main_process():
            for g in generators:
                _GENERATORS[g](self.catalog.root)
        comm.synchronize()
        self._generated.update(generators)

    def queries(self, name):
        """(queries, dropped Counter) of ``name``'s annotation file, parsed once per run.

        Shared by every caller: read them, do not change them."""
        return self._parse(self.entry(name))

    def _parse(self, entry):
        key = _file_key(entry)
        if key not in self._parsed:
            self._generate([entry])
            self._parsed[key] = annotations.load_annotations(*key)
        return self._parsed[key]

    @property
    def uses_word_pieces(self):
        """Sentences enter the model as DistilBERT word pieces (MMN's BERT encoder), not GloVe vectors."""
        return text_encoder_name(self.cfg) == "BERT"

    @property
    def uses_sentence_features(self):
        """Sentences enter the model as precomputed features read per query (INPUT.SENTENCE_FEATURES)."""
        return bool(self.cfg.INPUT.SENTENCE_FEATURES)

    def text_of(self, name):
        """How dataset ``name`` encodes sentences: its own precomputed sentence features, or the run's :meth:`text`."""
        if not self.uses_sentence_features:
            return self.text()
        entry = self.entry(name)
        return SentenceFeatures(self.text_features_folder(entry), entry.get("text_feature_key"))

    def text_features_folder(self, entry):
        """The sentence-feature folder of catalog ``entry``; an error when it names none."""
        if not entry.get("text_features"):
            raise TanError(f"dataset {entry['name']!r} has no text_features folder in its catalog entry, and "
                           f"INPUT.SENTENCE_FEATURES is True (docs/data.md §9.3)")
        return entry["text_features"]

    def text(self):
        """How the datasets encode sentences: the GloVe :meth:`vocabulary`, or word pieces."""
        if self.uses_sentence_features:
            raise TanError("INPUT.SENTENCE_FEATURES is True: sentences are read per query from each dataset's "
                           "text_features, and no vocabulary or sentence encoder is built")
        if not self.uses_word_pieces:
            return self.vocabulary()
        if self._word_pieces is None:
            self._word_pieces = WordPieces.from_config(self.cfg)
        return self._word_pieces

    def vocabulary(self):
        """Vectors of every word of the configured datasets, read once per run.

        The main process reads the text file (or the cache) first and writes the
        cache; the others wait for it and then read the cache."""
        if self._vocabulary is None:
            self.prepare()
            entries = {_file_key(self._entries[name]): self._entries[name] for name in self.names}
            words = set()
            for key in sorted(entries, key=str):
                for q in self._parse(entries[key])[0]:
                    words.update(tokenize(q.sentence))
            path, dim = self.word_vectors_path, self.cfg.INPUT.PRE_QUERY_SIZE
            cache_dir = word_vector_cache_dir(self.cfg)
            if comm.is_main_process():
                vectors = cached_word_vectors(path, words, dim, cache_dir)
            comm.synchronize()
            if not comm.is_main_process():
                vectors = cached_word_vectors(path, words, dim, cache_dir)
            get_logger("data").info("word vectors: %d of %d words found in %s", len(vectors), len(words), path)
            self._vocabulary = Vocabulary(vectors, dim)
        return self._vocabulary

    def dataset(self, name):
        """The MomentDataset of ``name``, built once per run."""
        if name not in self.names:  # its words would be missing from the vocabulary
            raise TanError(f"dataset {name!r} is not one of this run's datasets ({', '.join(self.names) or 'none'}; "
                           f"DATASETS.{'/'.join(self.splits)})")
        if name not in self._datasets:
            text = self.text_of(name)
            entry, cfg = self.entry(name), self.cfg
            self._datasets[name] = MomentDataset(
                entry["name"], entry["annotations"], entry["features"], entry["format"], text,
                cfg.INPUT.NUM_PRE_CLIPS, model_settings(cfg).FEATPOOL.INPUT_SIZE,
                feature_key=entry.get("feature_key"), cache_size=cfg.INPUT.FEATURE_CACHE_SIZE,
                durations=entry.get("durations"), parsed=self._parse(entry),
                input_size_key=model_key(cfg, "FEATPOOL.INPUT_SIZE"),
                length_tolerance=cfg.INPUT.FEATURE_LENGTH_TOLERANCE,
                query_size=cfg.INPUT.PRE_QUERY_SIZE if self.uses_sentence_features else None)
        return self._datasets[name]

    def datasets(self, names):
        """The datasets of ``names``, in order; every name is looked up before any is built."""
        if not names:
            raise TanError("no dataset named; set DATASETS.TRAIN / DATASETS.TEST")
        if not self.uses_sentence_features:
            self.text()
        for name in names:
            self.entry(name)
        return [self.dataset(name) for name in names]

    def _loader(self, dataset, batch_key, shuffle, distributed, by_video=False):
        world, rank = (comm.get_world_size(), comm.get_rank()) if distributed else (1, 0)
        batch_size = per_process_batch(self.cfg, batch_key, comm.get_world_size())
        # One sampler for one or many processes: shuffled from SEED and the epoch,
        # so a resumed run sees the same order as an uninterrupted one. Sampled
        # sentences of a video are drawn from the epoch too (training only).
        sampled = by_video and shuffle and self.cfg.DATALOADER.SENTENCES_PER_VIDEO > 0
        sampler = ResumableDistributedSampler(dataset, world, rank, shuffle, self.cfg.SEED, batch_size,
                                              keyed_by_epoch=sampled)
        workers = self.cfg.DATALOADER.NUM_WORKERS
        return DataLoader(dataset, batch_size=batch_size, sampler=sampler, num_workers=workers,
                          collate_fn=VideoBatchCollator() if by_video else BatchCollator(),
                          pin_memory=torch.cuda.is_available(), persistent_workers=workers > 0)


    def train_loader(self, distributed, by_video=False):
        """One shuffled loader over the concatenated DATASETS.TRAIN (SOLVER.BATCH_SIZE over all
        processes): batches of queries, or of videos with their sentences (``by_video``, for MMN)."""
        key = (distributed, by_video)
        if key not in self._train_loaders:
            datasets = self.datasets(self.cfg.DATASETS.TRAIN)
            if by_video:  # all of a video's sentences, or a sample of them (DATALOADER.SENTENCES_PER_VIDEO)
                dataset = VideoGroups(datasets, self.cfg.DATALOADER.SENTENCES_PER_VIDEO, self.cfg.SEED)
            else:
                dataset = datasets[0] if len(datasets) == 1 else ConcatDataset(datasets)
            self._train_loaders[key] = self._loader(dataset, "SOLVER.BATCH_SIZE", True, distributed, by_video)
        return self._train_loaders[key]

    def val_loaders(self, distributed, by_video=False):
        """Loaders of DATASETS.VAL for periodic evaluation; of DATASETS.TEST (with a warning) when VAL is empty."""
        names = self.cfg.DATASETS.VAL
        if not names:
            if not self._warned_val_fallback:
                get_logger("data").warning(VAL_FALLBACK_WARNING)
                self._warned_val_fallback = True
            names = self.cfg.DATASETS.TEST
        return self._eval_loaders_of(names, distributed, by_video)

    def test_loaders(self, distributed, by_video=False):
        """One loader per dataset of DATASETS.TEST, in order (``by_video``: batches of
        videos with all their sentences; ``loader.dataset.by_query`` is the queries' dataset)."""
        return self._eval_loaders_of(self.cfg.DATASETS.TEST, distributed, by_video)

    def _eval_loaders_of(self, names, distributed, by_video=False):
        loaders = []
        for dataset in self.datasets(names):
            key = (dataset.name, distributed, by_video)
            if key not in self._eval_loaders:
                source = VideoGroups([dataset]) if by_video else dataset
                self._eval_loaders[key] = self._loader(source, "TEST.BATCH_SIZE", False, distributed, by_video)
            loaders.append(self._eval_loaders[key])
        return loaders

    def _present(self, key):
        """Entries of this run's datasets whose ``key`` file exists (or is generated on first use)."""
        self.prepare()
        entries = [self._entries[name] for name in self.names]
        return [e for e in entries if e.get("generator") or (e.get(key) and _exists(e[key]))], entries

    def video_features(self, video):
        """[T, D_in] float32 features of ``video`` from the first configured feature file holding it
        (files that are absent are skipped: prediction may have only some splits on disk)."""
        present, entries = self._present("features")
        for entry in present:
            source = open_features(entry["features"], entry.get("feature_key"),
                                   self.cfg.INPUT.FEATURE_LENGTH_TOLERANCE)
            if source.shapes([video]):
                return source.read(video)
        files = sorted({_describe(e["features"]) for e in present})
        absent = sorted({_describe(e["features"]) for e in entries} - set(files))
        raise UnknownVideoError(f"video {video!r} is in none of the configured feature files "
                                f"({', '.join(files) or 'none'}{'; not on disk: ' + ', '.join(absent) if absent else ''}"
                                f"); pass --features FILE")

    def video_duration(self, video):
        """Seconds, from the annotations of the configured datasets that are on disk; None when not found."""
        for entry in self._present("annotations")[0]:
            for q in self._parse(entry)[0]:
                if q.video == video:
                    return q.duration
        return None


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
