"""Sentences as DistilBERT word-piece ids, for MMN's BERT text encoder
(MODEL.MMN.TEXT_ENCODER.NAME "BERT"; docs/data.md §5).

The tokenizer is the one saved with the model named by
MODEL.MMN.TEXT_ENCODER.BERT.PRETRAINED (a hub name or a local folder), so
the ids always fit the model. Each sentence becomes [CLS] pieces [SEP], as
MMN's datasets encode it; its length counts both marks.
"""
import numpy as np

from ..errors import TanError
from ..utils.optional import require_transformers
from .text import tokenize


class WordPieces:
    """The same interface as :class:`tan.data.text.Vocabulary`: ``encode_sentence``,
    ``encode_query``, ``drop_reason``, ``lookup`` (here the ids themselves, int64),
    ``unknown_count``."""

    def __init__(self, tokenizer, source):
        self.tokenizer, self.source = tokenizer, source
        self.unknown_id = tokenizer.unk_token_id

    @classmethod
    def from_pretrained(cls, pretrained):
        transformers = require_transformers()
        try:
            return cls(transformers.AutoTokenizer.from_pretrained(pretrained), pretrained)
        except (OSError, ValueError) as e:
            raise TanError(f"cannot load the tokenizer of {pretrained!r} (MODEL.MMN.TEXT_ENCODER.BERT.PRETRAINED): "
                           f"{e}") from None

    @classmethod
    def from_config(cls, cfg):
        return cls.from_pretrained(cfg.MODEL.MMN.TEXT_ENCODER.BERT.PRETRAINED)

    def encode_sentence(self, sentence):
        """[CLS] word pieces [SEP]; no ids for a sentence without words."""
        if not tokenize(sentence):
            return np.zeros(0, dtype=np.int64)
        # cut at the model's longest input (512 pieces for DistilBERT), [SEP] kept
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

    def __call__(self, sentences):
        """Sentences -> id arrays (prediction); a sentence without words is an error."""
        encoded = []
        for sentence in sentences:
            ids = self.encode_sentence(sentence)
            if not len(ids):
                raise TanError(f"sentence {sentence!r} has no words")
            encoded.append(ids)
        return encoded
