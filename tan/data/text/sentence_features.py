"""Precomputed sentence features (INPUT.SENTENCE_FEATURES, docs/data.md §9.3):
one file per query in a folder, the [L, E] token features of a text encoder
(CLIP's ``last_hidden_state`` as Moment-DETR and lighthouse store them), so a
run needs no word-vector file.

The encoder interface of tan/data/text/inputs.py: a query's "ids" are one
row index into this object's list of query files, and ``lookup`` reads that
file. Rows are L2-normalised per token, as lighthouse feeds them.
"""
import os

import numpy as np

from ...errors import TanError
from ..features.array_files import array_shape, list_array_files, read_array
from ..features.rows import l2_normalize_rows
from .inputs import TextInput, register_text_input

TEXT_KEY = "last_hidden_state"
MISSING = "query without sentence features"


class SentenceFeatures:
    """Sentence features of one dataset's queries: ``qid{qid}.npz`` (lighthouse's
    name) or ``{qid}.npz`` / ``{qid}.npy`` in ``folder``, array ``key`` in .npz files."""

    def __init__(self, folder, key=None, size=None):
        """``size``: the width every file must have (INPUT.PRE_QUERY_SIZE), checked by :meth:`check_encoded`."""
        if not folder or not os.path.isdir(folder):
            raise TanError(f"sentence feature folder {folder!r} not found (catalog field 'text_features')")
        self.folder = folder
        self.size = size
        self.key = key or TEXT_KEY
        self.paths = []  # row -> file, for the queries encoded so far
        self._files = None

    def __repr__(self):
        return f"sentence features {self.folder!r}"

    def files(self):
        """{file name without suffix: path}, from one listing of the folder."""
        if self._files is None:
            self._files = list_array_files(self.folder, "sentence feature folder")
        return self._files

    def path_of(self, qid):
        files = self.files()
        return files.get(f"qid{qid}") or files.get(str(qid))

    # The interface the datasets use.
    def encode_query(self, query):
        path = self.path_of(query.qid) if query.qid != "" else None
        if path is None:
            return np.asarray([-1], dtype=np.int64)
        self.paths.append(path)
        return np.asarray([len(self.paths) - 1], dtype=np.int64)

    def drop_reason(self, ids):
        return MISSING if ids[0] < 0 else None

    def unknown_count(self, ids):
        return 0

    def coverage(self, unknown, total):
        return "sentences from precomputed features"

    def check_encoded(self, ids_list, dataset):
        """Every kept query's features are [L >= 1, size] (file headers only)."""
        if self.size is None:
            return
        for ids in ids_list:
            shape = self.shape(ids)
            if len(shape) != 2 or shape[0] < 1 or shape[1] != self.size:
                raise TanError(f"dataset {dataset!r}: {self.paths[int(ids[0])]!r} holds sentence "
                               f"features of shape {shape}; expected [L, {self.size}] (INPUT.PRE_QUERY_SIZE)")

    def shape(self, ids):
        """(L, E) of an encoded query's file, from its header."""
        return array_shape(self.paths[int(ids[0])], self.key, "text_feature_key")

    def lookup(self, ids):
        """[L, E] token features of an encoded query, rows L2-normalised."""
        return l2_normalize_rows(read_array(self.paths[int(ids[0])], self.key, "text_feature_key"))


@register_text_input("sentence_features")
class SentenceFeatureFiles(TextInput):
    """INPUT.SENTENCE_FEATURES: each dataset's own folder of per-query files (catalog field
    "text_features"), [L, INPUT.PRE_QUERY_SIZE] each (docs/data.md §9.3)."""

    READS_BACKBONE_FEATURES = True

    def __init__(self, run_data, choice):
        super().__init__(run_data, choice)
        self._encoders = {}

    def folder(self, entry):
        """The sentence-feature folder of catalog ``entry``; an error when it names none."""
        if not entry.get("text_features"):
            raise TanError(f"dataset {entry['name']!r} has no text_features folder in its catalog entry, and "
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

