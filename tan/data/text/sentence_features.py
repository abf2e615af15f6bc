"""Precomputed sentence features (INPUT.SENTENCE_FEATURES, docs/data.md §9.3):
the [L, E] token features of a text encoder for each query, so a run needs no
word-vector file: one file per query in a folder (CLIP's ``last_hidden_state``
as Moment-DETR and lighthouse store them), or one HDF5 file with a dataset per
query id (MAD's ``CLIP_language_tokens_features.h5``).

The encoder interface of tan/data/text/inputs.py: a query's "ids" are one
row index into this object's list of query sources, and ``lookup`` reads that
one. Rows are L2-normalised per token, as lighthouse feeds them.
"""
import os

import h5py
import numpy as np

from ...errors import TanError
from ...utils.progress import progress
from ..features.array_files import list_array_files, read_array
from ..features.rows import l2_normalize_rows
from .inputs import TextInput, register_text_input

TEXT_KEY = "last_hidden_state"
HDF5_SUFFIXES = (".h5", ".hdf5")
MISSING = "query without sentence features"


class SentenceFeatures:
    """Sentence features of one dataset's queries: ``qid{qid}.npz`` (lighthouse's name) or
    ``{qid}.npz`` / ``{qid}.npy`` in folder ``source``, array ``key`` in .npz files; or, when
    ``source`` is an HDF5 file (.h5, .hdf5), its top-level dataset named by the query id."""

    def __init__(self, source, key=None, size=None):
        """``size``: the width every query's features must have (INPUT.PRE_QUERY_SIZE), checked by
        :meth:`check_encoded`."""
        self.hdf5 = bool(source) and os.path.isfile(source) and source.lower().endswith(HDF5_SUFFIXES)
        if not source or not (self.hdf5 or os.path.isdir(source)):
            raise TanError(f"sentence features {source!r} not found (catalog field 'text_features': a folder of "
                           f"per-query files, or an HDF5 file ({', '.join(HDF5_SUFFIXES)}) keyed by query id)")
        self.folder = source
        self.size = size
        self.key = key or TEXT_KEY
        self.paths = []  # row -> file (a folder) or query id (an HDF5 file), for the queries encoded so far
        self.qids = []  # row -> the query's id
        self._files = None
        self._h5 = None  # (process id, open file): a handle is not shared with loader workers

    def __repr__(self):
        return f"sentence features {self.folder!r}"

    def __getstate__(self):  # an open HDF5 handle does not travel to a loader worker; it opens its own
        return {**self.__dict__, "_h5": None}

    def files(self):
        """{file name without suffix (a folder) or query id (an HDF5 file): what to read}, listed once."""
        if self._files is None:
            if self.hdf5:
                try:
                    with h5py.File(self.folder, "r") as f:
                        self._files = {name: name for name, item in f.items() if isinstance(item, h5py.Dataset)}
                except OSError as e:
                    raise TanError(f"sentence feature file {self.folder!r} cannot be read as HDF5 ({e})") from None
            else:
                self._files = list_array_files(self.folder, "sentence feature folder")
        return self._files

    def path_of(self, qid):
        files = self.files()
        return (files.get(f"qid{qid}") if not self.hdf5 else None) or files.get(str(qid))

    def _h5_dataset(self, name):
        if self._h5 is None or self._h5[0] != os.getpid():
            self._h5 = (os.getpid(), h5py.File(self.folder, "r"))
        return self._h5[1][name]

    # The interface the datasets use.
    def encode_query(self, query):
        path = self.path_of(query.qid) if query.qid != "" else None
        if path is None:
            return np.asarray([-1], dtype=np.int64)
        self.paths.append(path)
        self.qids.append(str(query.qid))
        return np.asarray([len(self.paths) - 1], dtype=np.int64)

    def drop_reason(self, ids):
        return MISSING if ids[0] < 0 else None

    def unknown_count(self, ids):
        return 0

    def coverage(self, unknown, total):
        return "sentences from precomputed features"

    def _where(self, ids):
        row = int(ids[0])
        if self.hdf5:
            return f"{self.folder!r}, query {self.paths[row]!r}"
        return f"{self.paths[row]!r} (query {self.qids[row]!r})"

    def check_encoded(self, ids_list, dataset):
        """Every kept query's features are [L >= 1, size] and finite. Each query's values are read once:
        a NaN or infinite value makes every score of its query NaN, which ranks no moment, and the
        figures would fall to 0 without a word."""
        where = os.path.basename(self.folder.rstrip(os.sep))
        for ids in progress(ids_list, total=len(ids_list), desc=f"checking {where}", unit="query"):
            values = self._values(ids)
            if self.size is not None and (values.ndim != 2 or len(values) < 1 or values.shape[1] != self.size):
                raise TanError(f"dataset {dataset!r}: {self._where(ids)} holds sentence "
                               f"features of shape {values.shape}; expected [L, {self.size}] (INPUT.PRE_QUERY_SIZE)")
            finite = np.isfinite(values)
            if not finite.all():
                rows = finite.reshape(len(values), -1).all(axis=1) if values.ndim > 1 else finite.reshape(-1)
                raise TanError(f"dataset {dataset!r}: {self._where(ids)} holds sentence features with NaN or "
                               f"infinite values ({int((~rows).sum())} of its {len(rows)} rows); extract that "
                               f"query's features again, or remove them so that the query is left out and counted "
                               f"({MISSING!r})")

    def _values(self, ids):
        """[L, E] float32 token features of an encoded query, as stored."""
        if self.hdf5:
            return np.asarray(self._h5_dataset(self.paths[int(ids[0])])[()], dtype=np.float32)
        return read_array(self.paths[int(ids[0])], self.key, "text_feature_key")

    def lookup(self, ids):
        """[L, E] token features of an encoded query, rows L2-normalised."""
        return l2_normalize_rows(self._values(ids))


@register_text_input("sentence_features")
class SentenceFeatureFiles(TextInput):
    """INPUT.SENTENCE_FEATURES: each dataset's own sentence features (catalog field "text_features":
    a folder of per-query files or an HDF5 file keyed by query id), [L, INPUT.PRE_QUERY_SIZE] each
    (docs/data.md §9.3)."""

    READS_BACKBONE_FEATURES = True

    def __init__(self, run_data, choice):
        super().__init__(run_data, choice)
        self._encoders = {}

    def folder(self, entry):
        """The sentence features (folder or HDF5 file) of catalog ``entry``; an error when it names none."""
        if not entry.get("text_features"):
            raise TanError(f"dataset {entry['name']!r} has no text_features in its catalog entry, and "
                           f"INPUT.SENTENCE_FEATURES is True (docs/data.md §9.3)")
        return entry["text_features"]

    def dataset_files(self, entry):
        return [("text_features", self.folder(entry))]

    def encoder(self, name):
        if name not in self._encoders:
            entry = self.run_data.entry(name)
            self._encoders[name] = SentenceFeatures(self.folder(entry), entry.get("text_feature_key"),
                                                    self.cfg.INPUT.PRE_QUERY_SIZE)
        return self._encoders[name]

    def summary(self, dataset):
        missing = dataset.dropped.get(MISSING, 0)
        total = len(dataset) + missing
        return (f"sentence features in {dataset.vocabulary.folder!r}: {len(dataset)} of {total} queries "
                f"({100.0 * len(dataset) / max(total, 1):.1f}%) have a file")

    @classmethod
    def sentence_encoder(cls, cfg, choice):
        raise TanError("this model was trained on precomputed sentence features (INPUT.SENTENCE_FEATURES True) "
                       "and its checkpoint does not say which text encoder made them (they were not written by "
                       "tan-extract-features), so it cannot encode new sentences; evaluate it on datasets with "
                       "text_features (tan-test), or train on features that tan-extract-features made")

