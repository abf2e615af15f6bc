"""A text input added by a plug-in (docs/models.md §5): registered by name, chosen by a
model's text_input(cfg), and then read by the datasets, the checker and prediction as the
built-in ones are."""
import hashlib

import numpy as np
import pytest
import torch

from tan.config import load_config
from tan.config.models import TextInputChoice, declarations
from tan.data import RunData
from tan.data.check import check_run
from tan.data.collate import BatchCollator
from tan.data.prediction_inputs import sentence_encoder
from tan.data.text import register_text_input
from tan.data.text.inputs import TextInput, known_share
from tan.data.tokens import tokenize
from tan.modeling import build_model
from tan.modeling.tan2d.model import TAN

from conftest import SYNTHETIC_CONFIG


class HashedWords:
    """Each word as a one-hot row at its hash: no vocabulary, no file."""

    def __init__(self, size):
        self.size = size

    def encode_query(self, query):
        return self.encode(query.sentence)

    def encode(self, sentence):
        return np.asarray([int(hashlib.md5(w.encode()).hexdigest(), 16) % self.size for w in tokenize(sentence)],
                          dtype=np.int64)

    def drop_reason(self, ids):
        return None if len(ids) else "sentence without words"

    def lookup(self, ids):
        return np.eye(self.size, dtype=np.float32)[ids]

    def unknown_count(self, ids):
        return 0

    def coverage(self, unknown, total):
        return "every word hashed"

    def check_encoded(self, ids_list, dataset):
        pass


@register_text_input("hashed_words_for_a_test")
class HashedWordsInput(TextInput):
    def encoder(self, name):
        return HashedWords(self.cfg.INPUT.PRE_QUERY_SIZE)

    def summary(self, dataset):
        return known_share(dataset, "words hashed")

    @classmethod
    def sentence_encoder(cls, cfg, choice):
        encoder = HashedWords(cfg.INPUT.PRE_QUERY_SIZE)
        return lambda sentences: [encoder.lookup(encoder.encode(s)) for s in sentences]


@pytest.fixture
def hashed_tan(monkeypatch, synthetic_root, tmp_path):
    """2D-TAN, told by its text_input to read the plug-in's input (as a model of a plug-in would declare it)."""
    monkeypatch.setattr(TAN, "text_input", classmethod(lambda cls, cfg: TextInputChoice("hashed_words_for_a_test")))
    # no word-vector file: the input needs none
    return load_config(SYNTHETIC_CONFIG, ["DATASETS.ROOT", synthetic_root, "OUTPUT_DIR", str(tmp_path / "out"),
                                          "INPUT.WORD_VECTORS", str(tmp_path / "no_such_file.txt"),
                                          "INPUT.PRE_QUERY_SIZE", "64", "MODEL.DEVICE", "cpu"])


def test_a_plugin_text_input_feeds_the_datasets_the_checker_the_model_and_prediction(hashed_tan):
    data = RunData(hashed_tan)
    data.check_files()  # nothing asks for the word-vector file
    dataset = data.dataset("synthetic_train")
    item = dataset[0]
    assert item["query"].shape[1] == 64 and float(item["query"].sum()) == item["query"].shape[0]
    reports, problems = check_run(RunData(hashed_tan))
    assert not problems and all(r.text.endswith("words hashed (100.0%)") for r in reports), [r.text for r in reports]
    model = build_model(hashed_tan)
    batch = BatchCollator()([dataset[i] for i in range(4)])
    losses = model.losses(model(batch["feats"], batch["queries"], batch["wordlens"]), batch)
    assert torch.isfinite(losses["loss"])
    [encoded] = sentence_encoder(hashed_tan, declarations(hashed_tan).text_input)(["the cook holds the pan."])
    assert encoded.shape == (6, 64)
