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
from ...config.models import TextInputChoice
from ...errors import TanError
from ...utils.registry import Registry

TEXT_INPUTS = Registry("text input")


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
    # Its sentences are token features that a text backbone made (tan/video/): prediction encodes
    # new sentences with the backbone a checkpoint records, where it records one.
    READS_BACKBONE_FEATURES = False
    # Its sentences enter the model as token ids [L], not vectors [L, INPUT.PRE_QUERY_SIZE].
    GIVES_IDS = False

    def __init__(self, run_data, choice):
        self.run_data, self.choice, self.cfg = run_data, choice, run_data.cfg

    def dataset_files(self, entry):
        """(catalog field, path) of the files it reads for catalog ``entry``, besides annotations and features."""
        return []

    def problems(self):
        """What stops a run before any dataset is built (a missing file), as messages."""
        return []

    def prepare(self):
        """Load what could fail (a tokenizer) before anything is written."""

    def encoder(self, name):
        """The encoder of dataset ``name`` (see the module docstring); built once and kept where shared."""
        raise NotImplementedError

    def summary(self, dataset):
        """How much of ``dataset``'s sentences it covers, for tan-check-data."""
        return known_share(dataset, "tokens known")

    @classmethod
    def sentence_encoder(cls, cfg, choice):
        """A callable: sentences -> the model's inputs, for prediction on new text."""
        raise TanError(f"the text input {cls.NAME!r} cannot encode new sentences")


def known_share(dataset, what):
    """"K of N {what} (P%)": the tokens of ``dataset``'s kept queries that its encoder knows."""
    words = len(dataset.word_ids)
    known = words - dataset.unknown_words
    return f"{known} of {words} {what} ({100.0 * known / max(words, 1):.1f}%)"
