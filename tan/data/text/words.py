"""Tokens -> word vectors (GloVe text format): the vectors of a vocabulary,
cached, and the matrix a dataset looks its words up in."""
import hashlib
import io
import os

import numpy as np

from ...utils.io import atomic_write_bytes
from ...utils.logger import get_logger
from ..features.array_files import unreadable_reason
from ..tokens import tokenize
from .glove import read_word_vectors
from .word_index import WordVectorIndex

__all__ = ["Vocabulary", "cached_word_vectors", "read_word_vectors", "tokenize"]


def _cache_path(path, vocab, dim, cache_dir):
    """A name that changes when the source file (path, size, mtime), ``dim`` or the vocabulary changes."""
    stat = os.stat(path)
    digest = hashlib.sha1(f"{os.path.abspath(path)}|{stat.st_size}|{stat.st_mtime_ns}|{dim}|".encode())
    digest.update("\n".join(sorted(vocab)).encode())
    stem = os.path.splitext(os.path.basename(path))[0]
    return os.path.join(cache_dir, f"{stem}.{digest.hexdigest()[:16]}.npz")


def _from_index(path, vocab, dim, cache_dir):
    """The vectors of ``vocab`` from a complete index of the whole file in
    ``cache_dir`` (tan/data/text/word_index.py), if there is one; None otherwise
    (no index is built here: a run needs only its vocabulary)."""
    index = WordVectorIndex.existing(path, dim, cache_dir)
    if index is None:
        return None
    get_logger("data").info("word vectors: looked up in the index %s instead of reading %s", index.folder, path)
    return index.lookup(sorted(vocab))


class _DamagedCache(Exception):
    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


def _read_cache(cache, vocab, dim):
    """{word: float32[dim]} of a cache file that :func:`cached_word_vectors` wrote for
    ``vocab``; any exception when it is not such a file (_DamagedCache when it reads but
    holds the wrong thing)."""
    with np.load(cache, allow_pickle=False) as data:
        words, vectors = data["words"], data["vectors"]
    if words.ndim != 1 or words.dtype.kind != "U" or vectors.shape != (len(words), dim) \
            or vectors.dtype != np.float32:
        raise _DamagedCache(f"it holds words of type {words.dtype} and shape {words.shape} and vectors of "
                            f"shape {vectors.shape} {vectors.dtype}, expected [{len(words)}, {dim}] float32")
    strangers = set(words.tolist()) - set(vocab)
    if strangers:  # the name is made from the vocabulary, so its words can only be the vocabulary's
        raise _DamagedCache(f"it holds {len(strangers)} words that are not the datasets', e.g. "
                            f"{sorted(strangers)[0]!r}")
    return dict(zip(words.tolist(), vectors))


def cached_word_vectors(path, vocab, dim, cache_dir):
    """:func:`read_word_vectors`, with the result kept in ``cache_dir`` so that
    the next start reads a small file instead of a multi-gigabyte text file.
    Where an index of the whole file is already in ``cache_dir``, the vectors
    are taken from it instead of the text file (the same rows)."""
    if not os.path.isfile(path):
        return read_word_vectors(path, vocab, dim)  # raises the explanatory error
    cache = _cache_path(path, vocab, dim, cache_dir)
    logger = get_logger("data")
    if os.path.lexists(cache):
        try:
            vectors = _read_cache(cache, vocab, dim)
            logger.info("word vectors: %d read from the cache %s", len(vectors), cache)
            return vectors
        except Exception as e:  # noqa: BLE001 - a cache is only a copy: whatever the damage, rebuild it
            problem = e.reason if isinstance(e, _DamagedCache) else unreadable_reason(cache, e, advice=False)
            logger.warning("word-vector cache %s is damaged (%s); reading %s again and rewriting the cache",
                           cache, problem, path)
    vectors = _from_index(path, vocab, dim, cache_dir)
    if vectors is None:
        vectors = read_word_vectors(path, vocab, dim)
    words = sorted(vectors)
    buffer = io.BytesIO()
    np.savez(buffer, words=np.asarray(words, dtype=str),
             vectors=np.stack([vectors[w] for w in words]) if words else np.zeros((0, dim), np.float32))
    try:
        atomic_write_bytes(cache, buffer.getvalue())
        logger.info("word vectors cached in %s", cache)
    except OSError as e:
        logger.warning("cannot write the word-vector cache %s (%s); the next start reads %s again",
                       cache, e.strerror, path)
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

    # The encoder interface the datasets use (tan/data/text/inputs.py).
    def encode_sentence(self, sentence):
        return self.encode(tokenize(sentence))

    def encode_query(self, query):
        return self.encode_sentence(query.sentence)

    def drop_reason(self, ids):
        """Why a query with these ids cannot be used; None when it can."""
        return None if self.has_known(ids) else "sentence without a known word"

    def lookup(self, ids):
        """[L, E] word vectors of ``ids``."""
        return self.matrix[ids]

    def coverage(self, unknown, total):
        return f"{unknown} of {total} words ({100.0 * unknown / max(total, 1):.1f}%) have no word vector"

    def check_encoded(self, ids_list, dataset):
        pass

    def unknown_count(self, ids):
        return int((ids == 0).sum())

    def has_known(self, ids):
        return bool(ids.any())
