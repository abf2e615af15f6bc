"""Sentences: GloVe word vectors (with their cache and the index of a whole
file), word pieces and precomputed sentence features, and the registry of the
text inputs a model chooses from (inputs.py). Importing the package registers
the built-in text inputs, one module each."""
from . import sentence_features, word_pieces, word_vectors  # noqa: F401  (register the built-in text inputs)
from .inputs import TEXT_INPUTS, TextInput, register_text_input, text_input_class
from .word_index import WordVectorIndex
from .words import Vocabulary, tokenize

__all__ = ["TEXT_INPUTS", "TextInput", "register_text_input", "text_input_class", "WordVectorIndex",
           "Vocabulary", "tokenize"]
