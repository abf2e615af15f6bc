"""Sentences -> tokens -> word vectors (GloVe text format)."""
import os
import re

import numpy as np

from ..errors import TanError

# Words (lower-cased), clitics such as 's, and single punctuation marks.
_TOKEN = re.compile(r"[a-z0-9]+|'[a-z]+|[^\sa-z0-9]")


def tokenize(sentence):
    """Lower-case and split punctuation off: "He took a pan." -> [he, took, a, pan, .]"""
    return _TOKEN.findall(sentence.lower())


def read_word_vectors(path, vocab, dim):
    """Vectors of the words in ``vocab`` from a GloVe text file: {word: float32[dim]}.

    Each line is a token followed by ``dim`` numbers. The token is everything
    before the last ``dim`` fields, so the few 840B tokens that contain spaces
    parse too. Only words in ``vocab`` are converted.
    """
    if not os.path.isfile(path):
        raise TanError(
            f"word-vector file {path!r} not found (INPUT.WORD_VECTORS, relative to DATASETS.ROOT). "
            f"Put a GloVe text file there, e.g. glove.840B.300d.txt, or set INPUT.WORD_VECTORS to its path."
        )
    vectors = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line_no, line in enumerate(f, 1):
            fields = line.rstrip("\n").rstrip(" ").split(" ")
            if len(fields) <= dim:
                if line.strip():
                    raise TanError(f"{path}:{line_no}: expected a word and {dim} numbers "
                                   f"(INPUT.PRE_QUERY_SIZE), got {len(fields)} fields")
                continue
            word = " ".join(fields[:-dim])
            if word in vocab and word not in vectors:
                try:
                    vectors[word] = np.asarray(fields[-dim:], dtype=np.float32)
                except ValueError:
                    raise TanError(f"{path}:{line_no}: the last {dim} fields of the line are not numbers") from None
    return vectors


class Vocabulary:
    """The known words' vectors as one matrix; row 0, the zero vector, is for unknown words."""

    def __init__(self, vectors, dim):
        self.words = sorted(vectors)
        self.index = {w: i + 1 for i, w in enumerate(self.words)}
        self.matrix = np.zeros((len(self.words) + 1, dim), dtype=np.float32)
        for w, i in self.index.items():
            self.matrix[i] = vectors[w]

    def encode(self, tokens):
        """Token ids (0 for unknown words)."""
        return np.asarray([self.index.get(t, 0) for t in tokens], dtype=np.int64)
