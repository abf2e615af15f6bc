"""The "word_vectors" text input: a GloVe text file (INPUT.WORD_VECTORS), of
which a run reads the vectors of its datasets' words (docs/data.md §4)."""
import os
from collections import Counter

from ...utils import comm
from ...utils.logger import get_logger
from ..catalog import resolve_path
from ..generated import cache_dir as prepared_data_folder
from ..tokens import tokenize
from .free_text import SentenceEncoder
from .glove import check_finite_vectors
from .inputs import TextInput, known_share, register_text_input
from .words import Vocabulary, cached_word_vectors

EXAMPLES = 5  # words named in a summary


@register_text_input("word_vectors")
class WordVectors(TextInput):
    """INPUT.WORD_VECTORS (a GloVe text file, relative to DATASETS.ROOT): the run reads the
    vectors of its datasets' words (cached; docs/data.md §4)."""

    def __init__(self, run_data, choice):
        super().__init__(run_data, choice)
        self._vocabulary = None

    @property
    def path(self):
        return resolve_path(self.cfg.DATASETS.ROOT, self.cfg.INPUT.WORD_VECTORS)

    @property
    def needed(self):
        """A generated dataset ships its own vectors: the file is needed when some dataset is not generated."""
        return any(not self.run_data.entry(name).get("generator") for name in self.run_data.names)

    def problems(self):
        if not self.needed or os.path.isfile(self.path):
            return []
        return [f"word-vector file {self.path!r} not found (INPUT.WORD_VECTORS, relative to DATASETS.ROOT). Put a "
                f"GloVe text file there, e.g. glove.840B.300d.txt, or set INPUT.WORD_VECTORS; or, with datasets "
                f"that have text_features, set INPUT.SENTENCE_FEATURES True"]

    def encoder(self, name):
        return self.vocabulary()

    def vocabulary(self):
        """Vectors of every word of the run's datasets, read once per run.

        The main process reads the text file (or the cache) first and writes the
        cache; the others wait for it and then read the cache."""
        if self._vocabulary is None:
            words = set()
            for queries in self.run_data.parsed_files():
                for q in queries:
                    words.update(tokenize(q.sentence))
            path, dim = self.path, self.cfg.INPUT.PRE_QUERY_SIZE
            cache_dir = prepared_data_folder(self.cfg)
            if comm.is_main_process():
                vectors = cached_word_vectors(path, words, dim, cache_dir)
            comm.synchronize()
            if not comm.is_main_process():
                vectors = cached_word_vectors(path, words, dim, cache_dir)
            check_finite_vectors(path, vectors)
            get_logger("data").info("word vectors: %d of %d words found in %s", len(vectors), len(words), path)
            self._vocabulary = Vocabulary(vectors, dim)
        return self._vocabulary

    def summary(self, dataset):
        index = dataset.vocabulary.index
        unknown = Counter(w for sentence in dataset.sentences for w in tokenize(sentence) if w not in index)
        common = ", ".join(f"{w!r} {n}" for w, n in unknown.most_common(EXAMPLES))
        return (f"{known_share(dataset, 'words with a vector in ' + repr(self.path))}; {len(unknown)} distinct "
                f"words without one{' (most frequent: ' + common + ')' if unknown else ''}")

    @classmethod
    def sentence_encoder(cls, cfg, choice):
        return SentenceEncoder.from_config(cfg)
