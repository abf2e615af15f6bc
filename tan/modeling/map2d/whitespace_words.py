"""The reference codes' words (microsoft's 2D-TAN, MS-2D-TAN) as a text input,
"whitespace_words" (MODEL.TAN_MSRA.TOKENS and MODEL.MS_TAN.TOKENS "whitespace").

Their datasets look each word of ``sentence.split()``, lower-cased, up in GloVe
(unknown words: zero vectors); punctuation stays attached to its word, so
"pan." is a word of its own, which GloVe does not have. Their Charades-STA
readers cut each line at ".\\n", so a sentence of the charades_txt format
loses its final "." first (the charades_txt_trimmed format has lost it already). No sentence is dropped for having no known word.
The vectors come from INPUT.WORD_VECTORS through tan's cache, as for the
"word_vectors" input (docs/data.md §4), which this one extends.
"""
import numpy as np

from ...data.generated import cache_dir as prepared_data_folder
from ...data.text.free_text import SentenceEncoder
from ...data.text.inputs import known_share, register_text_input
from ...data.text.word_vectors import WordVectors
from ...data.text.words import Vocabulary, cached_word_vectors
from ...errors import TanError
from ...utils import comm
from ...utils.logger import get_logger


def reference_words(sentence, drop_final_period=False):
    """The words the reference reads in ``sentence`` (``drop_final_period``: a charades_txt line's)."""
    if drop_final_period and sentence.endswith("."):
        sentence = sentence[:-1]
    return [word.lower() for word in sentence.split()]


class ReferenceVocabulary(Vocabulary):
    """A dataset's encoder (tan/data/text/inputs.py) with the reference's words."""

    def __init__(self, vectors, dim, drop_final_period):
        super().__init__(vectors, dim)
        self.drop_final_period = drop_final_period

    def encode_sentence(self, sentence):
        return self.encode(reference_words(sentence, self.drop_final_period))

    def drop_reason(self, ids):
        return None if len(ids) else "sentence without words"


@register_text_input("whitespace_words")
class ReferenceWords(WordVectors):
    """INPUT.WORD_VECTORS, read for the words of ``sentence.split()`` of the run's datasets."""

    def __init__(self, run_data, choice):
        super().__init__(run_data, choice)
        self._vectors, self._encoders = None, {}

    def encoder(self, name):
        drop = self.run_data.entry(name)["format"] == "charades_txt"
        if drop not in self._encoders:
            self._encoders[drop] = ReferenceVocabulary(self.vectors(), self.cfg.INPUT.PRE_QUERY_SIZE, drop)
        return self._encoders[drop]

    def vectors(self):
        """{word: vector} of every word of the run's datasets, read once (the main process first)."""
        if self._vectors is None:
            words = set()
            for entry in self.run_data.entries():
                drop = entry["format"] == "charades_txt"
                for query in self.run_data.queries(entry["name"])[0]:
                    words.update(reference_words(query.sentence, drop))
            path, dim, cache = self.path, self.cfg.INPUT.PRE_QUERY_SIZE, prepared_data_folder(self.cfg)
            if comm.is_main_process():  # it writes the cache, which the others then read
                self._vectors = cached_word_vectors(path, words, dim, cache)
            comm.synchronize()
            if not comm.is_main_process():
                self._vectors = cached_word_vectors(path, words, dim, cache)
            get_logger("data").info("word vectors: %d of %d words (split at white space) found in %s",
                                    len(self._vectors), len(words), path)
        return self._vectors

    def summary(self, dataset):
        return known_share(dataset, f"words (split at white space) with a vector in {self.path!r}")

    @classmethod
    def sentence_encoder(cls, cfg, choice):
        return ReferenceSentenceEncoder(SentenceEncoder.from_config(cfg))


class ReferenceSentenceEncoder:
    """New sentences (prediction) -> [L, E] vectors of their white-space words, from the index
    of the whole word-vector file; unknown words are zero vectors, as in the reference."""

    def __init__(self, encoder):
        self.encoder = encoder

    def __call__(self, sentences):
        words = [reference_words(s) for s in sentences]
        known = self.encoder.index.lookup({w for ws in words for w in ws})
        zero = np.zeros(self.encoder.dim, np.float32)
        encoded = []
        for sentence, ws in zip(sentences, words):
            if not ws:
                raise TanError(f"sentence {sentence!r} has no words")
            encoded.append(np.stack([known.get(w, zero) for w in ws]))
        return encoded
