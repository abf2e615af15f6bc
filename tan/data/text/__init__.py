"""Sentences: tokens, GloVe word vectors (with their cache and the index of a
whole file), word pieces and precomputed sentence features, and the registry
of text inputs that a model chooses from (inputs.py)."""
from .inputs import TEXT_INPUTS, TextInput, register_text_input, text_input_class
from .word_index import WordVectorIndex
from .words import Vocabulary, tokenize

__all__ = ["TEXT_INPUTS", "TextInput", "register_text_input", "text_input_class", "WordVectorIndex",
           "Vocabulary", "tokenize"]
