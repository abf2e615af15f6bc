"""GloVe text files ("word v1 ... vE" per line): reading their entries."""
import os

import numpy as np

from ...errors import TanError
from ...utils.progress import progress


def check_word_vector_file(path):
    """TanError unless ``path`` is a file."""
    if not os.path.isfile(path):
        raise TanError(
            f"word-vector file {path!r} not found (INPUT.WORD_VECTORS, relative to DATASETS.ROOT). "
            f"Put a GloVe text file there, e.g. glove.840B.300d.txt, or set INPUT.WORD_VECTORS to its path."
        )


def glove_entries(path, dim, desc=None):
    """(line number, token, its ``dim`` number fields as strings) of each
    non-blank line of a GloVe text file, in file order (duplicates included).

    The token is everything before the last ``dim`` fields, so the few 840B
    tokens that contain spaces parse too. A non-blank line with ``dim`` or
    fewer fields raises a TanError naming file and line. ``desc``: the
    progress bar's label (default "reading FILE")."""
    check_word_vector_file(path)
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = progress(f, desc=desc or f"reading {os.path.basename(path)}", unit=" lines")
        for line_no, line in enumerate(lines, 1):
            fields = line.rstrip("\n").rstrip(" ").split(" ")
            if len(fields) <= dim:
                if line.strip():
                    raise TanError(f"{path}:{line_no}: expected a word and {dim} numbers "
                                   f"(INPUT.PRE_QUERY_SIZE), got {len(fields)} fields")
                continue
            yield line_no, " ".join(fields[:-dim]), fields[-dim:]


def parse_vector(path, line_no, numbers):
    """float32 vector of one entry's number fields (the one conversion every reader uses,
    so that the same line gives the same bits whichever way it is read)."""
    try:
        return np.asarray(numbers, dtype=np.float32)
    except ValueError:
        raise TanError(f"{path}:{line_no}: the last {len(numbers)} fields of the line are not numbers") from None


def check_finite_vectors(path, vectors):
    """TanError naming ``path`` and the words of ``vectors`` ({word: vector}) whose vector holds NaN or
    an infinite value ("nan" and "inf" parse as numbers): a sentence with such a word would score NaN
    everywhere and rank no moment, silently."""
    bad = sorted(word for word, vector in vectors.items() if not np.isfinite(vector).all())
    if bad:
        more = f" and {len(bad) - 1} more" if len(bad) > 1 else ""
        raise TanError(f"word-vector file {path!r}: the vector of {bad[0]!r}{more} holds NaN or infinite values; "
                       f"correct its line, or remove it so that the word is unknown")


def read_word_vectors(path, vocab, dim):
    """Vectors of the words in ``vocab`` from a GloVe text file: {word: float32[dim]}.

    Each line is a token followed by ``dim`` numbers (:func:`glove_entries`);
    the first entry of a token wins. Only words in ``vocab`` are converted.
    """
    vectors = {}
    for line_no, word, numbers in glove_entries(path, dim):
        if word in vocab and word not in vectors:
            vectors[word] = parse_vector(path, line_no, numbers)
    return vectors
