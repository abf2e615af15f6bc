"""New sentences as word-vector sequences, for prediction: any word of the
word-vector file costs one lookup in the index of the whole file, and no
dataset's annotations are read."""
import os

import numpy as np

from ...errors import TanError
from ...utils.logger import get_logger
from ..catalog import resolve_path
from ..dataset import named
from ..generated import cache_dir, write_configured
from .glove import check_finite_vectors
from .word_index import WordVectorIndex
from ..tokens import tokenize


# How much of a long sentence a message shows, and how many of its unknown words it names.
SHOWN_CHARACTERS = 80
WORDS_NAMED = 10


def _shown(sentence):
    """The sentence quoted, its start only when it is long (with its length)."""
    if len(sentence) <= SHOWN_CHARACTERS:
        return repr(sentence)
    return f"{sentence[:SHOWN_CHARACTERS]!r}... ({len(sentence)} characters)"


class SentenceEncoder:
    """Sentences -> word-vector sequences, from the index of the whole
    word-vector file (:class:`~tan.data.text.word_index.WordVectorIndex`, built
    in ``cache_dir`` on first use): any word costs a lookup, and no dataset's
    annotations are read. A word's vector is the row the datasets'
    vocabulary gets from the same file."""

    def __init__(self, word_vectors_path, dim, cache_dir):
        self.path = word_vectors_path
        self.dim = dim
        self.index = WordVectorIndex.open(word_vectors_path, dim, cache_dir)
        self.known = {}  # words looked up so far (found ones only)

    @classmethod
    def from_config(cls, cfg):
        """INPUT.WORD_VECTORS (relative to DATASETS.ROOT), INPUT.PRE_QUERY_SIZE and the word-vector cache folder."""
        path = resolve_path(cfg.DATASETS.ROOT, cfg.INPUT.WORD_VECTORS)
        if not os.path.isfile(path):
            write_configured(cfg)  # a generated dataset (the synthetic one) writes its word-vector file
        return cls(path, cfg.INPUT.PRE_QUERY_SIZE, cache_dir(cfg))

    def __call__(self, sentences):
        tokens = [tokenize(s) for s in sentences]
        found = self.index.lookup({t for ts in tokens for t in ts} - set(self.known))
        check_finite_vectors(self.path, found)
        self.known.update(found)
        encoded = []
        for sentence, ts in zip(sentences, tokens):
            unknown = list(dict.fromkeys(t for t in ts if t not in self.known))  # each word once, in order
            if not any(t in self.known for t in ts):
                raise TanError(f"sentence {_shown(sentence)} has no word with a word vector "
                               f"({'no words' if not ts else 'unknown: ' + named(unknown, WORDS_NAMED)})")
            if unknown:
                get_logger("predict").warning("%s: no word vector for %s (zero vectors used)", _shown(sentence),
                                              named(unknown, WORDS_NAMED))
            encoded.append(np.stack([self.known.get(t, np.zeros(self.dim, np.float32)) for t in ts]))
        return encoded
