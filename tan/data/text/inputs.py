"""Text inputs: the ways sentences enter a model, registered by name.

A model says which one it needs (``text_input(cfg)``, a
:class:`~tan.config.models.TextInputChoice`); the run's data builds it once
(:class:`tan.data.RunData`). Built in: "word_vectors" (a GloVe file, one
vector per word), "word_pieces" (a Hugging Face tokenizer's ids) and
"sentence_features" (precomputed token features, one file per query). A
plug-in adds one with :func:`register_text_input` (docs/data.md §11).

A text input gives, for each dataset, an *encoder* with the interface the
datasets use: ``encode_query(query)`` -> ids (a 1-D array), ``drop_reason(ids)``
(None, or why the query cannot be used), ``lookup(ids)`` -> the model's input
for the sentence ([L, E] vectors or [L] ids), ``unknown_count(ids)``,
``coverage(unknown, total)`` (a phrase for the log) and
``check_encoded(ids_list, dataset)`` (an error when the encoded queries cannot
feed the model).
"""
import os
from collections import Counter

from ...config.models import TextInputChoice
from ...errors import TanError
from ...utils import comm
from ...utils.logger import get_logger
from ...utils.registry import Registry
from .free_text import SentenceEncoder
from .sentence_features import MISSING, SentenceFeatures
from .word_pieces import WordPieces
from .words import Vocabulary, cached_word_vectors, tokenize

TEXT_INPUTS = Registry("text input")
EXAMPLES = 5  # words named in a summary


def register_text_input(name):
    """Class decorator: register a :class:`TextInput` under ``name``."""
    def deco(cls):
        cls.NAME = name
        return TEXT_INPUTS.register(name)(cls)
    return deco


def text_input_class(choice):
    """The registered class of ``choice`` (a TextInputChoice or a name)."""
    name = choice.name if isinstance(choice, TextInputChoice) else choice
    return TEXT_INPUTS.get(name)


class TextInput:
    """How one run's datasets encode sentences; ``run_data`` is the run's RunData."""
    NAME = ""

    def __init__(self, run_data, choice):
        self.run_data, self.choice, self.cfg = run_data, choice, run_data.cfg

    def dataset_files(self, entry):
        """(catalog field, path) of the files it reads for catalog ``entry``, besides annotations and features."""
        return []

    def problems(self, for_checker=False):
        """What stops a run before any dataset is built (a missing file), as messages."""
        return []

    def prepare(self):
        """Load what could fail (a tokenizer) before anything is written."""

    def encoder(self, name):
        """The encoder of dataset ``name`` (see the module docstring); built once and kept where shared."""
        raise NotImplementedError

    def summary(self, dataset):
        """How much of ``dataset``'s sentences it covers, for tan-check-data."""
        words = len(dataset.word_ids)
        known = words - dataset.unknown_words
        return f"{known} of {words} tokens known ({100.0 * known / max(words, 1):.1f}%)"

    @classmethod
    def sentence_encoder(cls, cfg, choice):
        """A callable: sentences -> the model's inputs, for prediction on new text."""
        raise TanError(f"the text input {cls.NAME!r} cannot encode new sentences")


@register_text_input("word_vectors")
class WordVectors(TextInput):
    """INPUT.WORD_VECTORS (a GloVe text file, relative to DATASETS.ROOT): the run reads the
    vectors of its datasets' words (cached; docs/data.md §4)."""

    def __init__(self, run_data, choice):
        super().__init__(run_data, choice)
        self._vocabulary = None

    @property
    def path(self):
        return self.run_data.resolve(self.cfg.INPUT.WORD_VECTORS)

    @property
    def needed(self):
        """A generated dataset ships its own vectors: the file is needed when some dataset is not generated."""
        return any(not self.run_data.entry(name).get("generator") for name in self.run_data.names)

    def problems(self, for_checker=False):
        if not self.needed or os.path.isfile(self.path):
            return []
        fix = ("or set INPUT.SENTENCE_FEATURES True with text_features" if for_checker else
               "Put a GloVe text file there, e.g. glove.840B.300d.txt, or set INPUT.WORD_VECTORS.")
        return [f"word-vector file {self.path!r} not found (INPUT.WORD_VECTORS, relative to DATASETS.ROOT)"
                + ("; " if for_checker else ". ") + fix]

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
            cache_dir = self.run_data.cache_dir()
            if comm.is_main_process():
                vectors = cached_word_vectors(path, words, dim, cache_dir)
            comm.synchronize()
            if not comm.is_main_process():
                vectors = cached_word_vectors(path, words, dim, cache_dir)
            get_logger("data").info("word vectors: %d of %d words found in %s", len(vectors), len(words), path)
            self._vocabulary = Vocabulary(vectors, dim)
        return self._vocabulary

    def summary(self, dataset):
        words = len(dataset.word_ids)
        known = words - dataset.unknown_words
        index = dataset.vocabulary.index
        unknown = Counter(w for sentence in dataset.sentences for w in tokenize(sentence) if w not in index)
        common = ", ".join(f"{w!r} {n}" for w, n in unknown.most_common(EXAMPLES))
        return (f"{known} of {words} words with a vector in {self.path!r} "
                f"({100.0 * known / max(words, 1):.1f}%); {len(unknown)} distinct words without one"
                f"{' (most frequent: ' + common + ')' if unknown else ''}")

    @classmethod
    def sentence_encoder(cls, cfg, choice):
        return SentenceEncoder.from_config(cfg)


@register_text_input("word_pieces")
class WordPieceIds(TextInput):
    """A Hugging Face tokenizer's ids: the choice's ``pretrained`` name or folder (its
    config ``key`` named in errors)."""

    def __init__(self, run_data, choice):
        super().__init__(run_data, choice)
        self._word_pieces = None

    def prepare(self):
        self.encoder(None)

    def encoder(self, name):
        if self._word_pieces is None:
            self._word_pieces = self.load(self.choice)
        return self._word_pieces

    @staticmethod
    def load(choice):
        return WordPieces.from_pretrained(choice.option("pretrained"), choice.option("key", "the text input"))

    def summary(self, dataset):
        words = len(dataset.word_ids)
        known = words - dataset.unknown_words
        return f"{known} of {words} word pieces known to the tokenizer ({100.0 * known / max(words, 1):.1f}%)"

    @classmethod
    def sentence_encoder(cls, cfg, choice):
        return cls.load(choice)


@register_text_input("sentence_features")
class SentenceFeatureFiles(TextInput):
    """INPUT.SENTENCE_FEATURES: each dataset's own folder of per-query files (catalog field
    "text_features"), [L, INPUT.PRE_QUERY_SIZE] each (docs/data.md §9.3)."""

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
        raise TanError("this model was trained on precomputed sentence features (INPUT.SENTENCE_FEATURES True), "
                       "so it cannot encode new sentences; evaluate it on datasets with text_features "
                       "(tan-test), or train with word vectors to ground free text")
