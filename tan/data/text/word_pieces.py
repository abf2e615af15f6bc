"""Sentences as word-piece ids of a Hugging Face tokenizer, for models whose
text encoder is a pretrained transformer (the "word_pieces" text input;
docs/data.md §5).

The tokenizer is the one saved with the pretrained model the model's config
names (a hub name or a local folder), so the ids always fit the model. Each
sentence becomes [CLS] pieces [SEP], as such encoders read it; its
length counts both marks.
"""
import numpy as np

from ...errors import TanError
from ...utils.optional import require_transformers
from ..tokens import tokenize
from .inputs import TextInput, known_share, register_text_input


class WordPieces:
    """The encoder interface of tan/data/text/inputs.py; ``lookup`` gives the ids
    themselves (int64)."""

    def __init__(self, tokenizer, source):
        self.tokenizer, self.source = tokenizer, source
        self.unknown_id = tokenizer.unk_token_id

    @classmethod
    def from_pretrained(cls, pretrained, key="the text input"):
        """The tokenizer of ``pretrained``; ``key``: the config key that names it, for errors."""
        transformers = require_transformers(f"{key} {pretrained!r}")
        try:
            return cls(transformers.AutoTokenizer.from_pretrained(pretrained), pretrained)
        except (OSError, ValueError) as e:
            raise TanError(f"cannot load the tokenizer of {pretrained!r} ({key}): {e}") from None

    def encode_sentence(self, sentence):
        """[CLS] word pieces [SEP]; no ids for a sentence without words."""
        if not tokenize(sentence):
            return np.zeros(0, dtype=np.int64)
        # cut at the model's longest input (512 pieces for most encoders), [SEP] kept
        return np.asarray(self.tokenizer(sentence, truncation=True)["input_ids"], dtype=np.int64)

    def encode_query(self, query):
        return self.encode_sentence(query.sentence)

    def drop_reason(self, ids):
        return None if self.has_known(ids) else "sentence without a known word"

    def lookup(self, ids):
        return ids

    def unknown_count(self, ids):
        return int((ids == self.unknown_id).sum())

    def has_known(self, ids):
        return len(ids) > 0

    def coverage(self, unknown, total):
        return f"{unknown} of {total} word pieces ({100.0 * unknown / max(total, 1):.1f}%) are unknown to the tokenizer"

    def check_encoded(self, ids_list, dataset):
        pass

    def __call__(self, sentences):
        """Sentences -> id arrays (prediction); a sentence without words is an error."""
        encoded = []
        for sentence in sentences:
            ids = self.encode_sentence(sentence)
            if not len(ids):
                raise TanError(f"sentence {sentence!r} has no words")
            encoded.append(ids)
        return encoded


@register_text_input("word_pieces")
class WordPieceIds(TextInput):
    """A Hugging Face tokenizer's ids: the choice's ``pretrained`` name or folder (its
    config ``key`` named in errors)."""
    GIVES_IDS = True

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
        return known_share(dataset, "word pieces known to the tokenizer")

    @classmethod
    def sentence_encoder(cls, cfg, choice):
        return cls.load(choice)
