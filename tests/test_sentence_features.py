"""Precomputed sentence features (INPUT.SENTENCE_FEATURES, docs/data.md §9.3):
file names, widths, what the config refuses, and prediction refusing text it
cannot encode."""
import json

import numpy as np
import pytest

from tan.config.models import declarations
from tan.config import load_config
from tan.data import sentence_encoder
from tan.data.dataset import MomentDataset
from tan.data.text.sentence_features import SentenceFeatures
from tan.errors import TanError

from conftest import REPO

MMN_SYNTHETIC = f"{REPO}/configs/mmn_synthetic.yaml"
TAN_SYNTHETIC = f"{REPO}/configs/2dtan_synthetic.yaml"


def dataset(tmp_path, text_rows, query_size=4):
    records = [{"qid": q, "query": "cut the onion", "vid": "v", "duration": 10.0, "relevant_windows": [[1, 3]]}
               for q in range(3)]
    (tmp_path / "ann.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (tmp_path / "f").mkdir()
    np.save(tmp_path / "f" / "v.npy", np.ones((10, 2), np.float32))
    (tmp_path / "t").mkdir(exist_ok=True)
    for name, rows in text_rows.items():
        np.savez(tmp_path / "t" / f"{name}.npz", last_hidden_state=rows)
    text = SentenceFeatures(str(tmp_path / "t"), size=query_size)
    return MomentDataset.from_files("s", str(tmp_path / "ann.jsonl"), str(tmp_path / "f"), "jsonl", text, 4, 2)


def test_files_are_found_by_either_name_and_rows_are_normalised(tmp_path):
    rows = np.arange(1, 9, dtype=np.float16).reshape(2, 4)
    ds = dataset(tmp_path, {"qid0": rows, "1": 2 * rows})  # lighthouse's name, and TACoS's
    assert len(ds) == 2 and ds.dropped == {"query without sentence features": 1}
    expected = rows.astype(np.float32) / np.linalg.norm(rows.astype(np.float32), axis=1, keepdims=True)
    np.testing.assert_allclose(ds[0]["query"].numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(ds[1]["query"].numpy(), expected, rtol=1e-6)


def test_sentence_features_of_the_wrong_width_name_the_file_and_the_key(tmp_path):
    with pytest.raises(TanError, match=r"qid1.npz' \(query '1'\) holds sentence features of shape \(3, 5\); "
                                       r"expected \[L, 4\] \(INPUT.PRE_QUERY_SIZE\)"):
        dataset(tmp_path, {"qid0": np.ones((2, 4)), "qid1": np.ones((3, 5))})


def test_an_empty_sentence_feature_file_is_an_error(tmp_path):
    with pytest.raises(TanError, match=r"shape \(0, 4\)"):
        dataset(tmp_path, {"qid0": np.ones((0, 4))})


def mad_records(path):
    """A MAD annotation file of three queries (ids "7", "8", "9") in one movie."""
    path.write_text(json.dumps({qid: {"movie": "m", "sentence": "Someone cuts the onion.", "ext_timestamps": [1, 3],
                                      "movie_duration": 10.0} for qid in ("7", "8", "9")}))
    return str(path)


def test_one_hdf5_file_keyed_by_query_id_as_mad_ships_its_clip_tokens(tmp_path):
    """MAD's CLIP_language_tokens_features.h5: a dataset [L, E] per query id, read as a folder's files are
    (rows normalised; a query without one left out and counted), and a worker opens its own handle."""
    import pickle

    import h5py

    rows = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    with h5py.File(tmp_path / "tokens.h5", "w") as h5:
        h5.create_dataset("7", data=rows)
        h5.create_dataset("9", data=2 * rows[:2])
        h5.create_group("not_a_query")
    (tmp_path / "f").mkdir()
    np.save(tmp_path / "f" / "m.npy", np.ones((10, 2), np.float32))
    text = SentenceFeatures(str(tmp_path / "tokens.h5"), size=4)
    ds = MomentDataset.from_files("mad_s", mad_records(tmp_path / "mad.json"), str(tmp_path / "f"), "mad", text, 4, 2)
    assert len(ds) == 2 and ds.dropped == {"query without sentence features": 1}
    normalised = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    np.testing.assert_allclose(ds[0]["query"].numpy(), normalised, rtol=1e-6)
    np.testing.assert_allclose(ds[1]["query"].numpy(), normalised[:2], rtol=1e-6)
    copy = pickle.loads(pickle.dumps(text))  # as a spawned loader worker gets it: no open handle travels
    assert copy._h5 is None and np.array_equal(copy.lookup(np.asarray([0])), text.lookup(np.asarray([0])))
    with h5py.File(tmp_path / "wide.h5", "w") as h5:
        h5.create_dataset("8", data=np.ones((2, 5), np.float32))
    with pytest.raises(TanError, match=r"wide.h5', query '8' holds sentence features of shape \(2, 5\); "
                                       r"expected \[L, 4\]"):
        MomentDataset.from_files("mad_s", mad_records(tmp_path / "mad.json"), str(tmp_path / "f"), "mad",
                                 SentenceFeatures(str(tmp_path / "wide.h5"), size=4), 4, 2)
    (tmp_path / "broken.h5").write_text("not HDF5")
    with pytest.raises(TanError, match="broken.h5' cannot be read as HDF5"):
        SentenceFeatures(str(tmp_path / "broken.h5"), size=4).files()
    with pytest.raises(TanError, match="an HDF5 file \\(.h5, .hdf5\\) keyed by query id"):
        SentenceFeatures(str(tmp_path / "mad.json"), size=4)


def test_the_catalog_takes_sentence_features_where_the_format_has_query_ids(tmp_path):
    from tan.data.catalog import DatasetCatalog

    catalog = DatasetCatalog(str(tmp_path))
    for fmt in ("jsonl", "mad", "ego4d_nlq"):
        catalog.register(f"d_{fmt}", {"annotations": "a", "features": "f", "format": fmt, "text_features": "t.h5"})
    with pytest.raises(TanError, match="text_features are found by query id, which the 'tacos' format does not "
                                       "give its queries \\(formats with query ids: ego4d_nlq, jsonl, mad(, \\w+)*\\)"):  # and a plug-in's
        catalog.register("d_tacos", {"annotations": "a", "features": "f", "format": "tacos", "text_features": "t"})


def test_the_config_refuses_sentence_features_with_distilbert_and_a_bad_tolerance():
    with pytest.raises(TanError, match="INPUT.SENTENCE_FEATURES.*MODEL.MMN.TEXT_ENCODER.NAME LSTM"):
        load_config(MMN_SYNTHETIC, ["INPUT.SENTENCE_FEATURES", "True", "MODEL.MMN.TEXT_ENCODER.NAME", "BERT"])
    with pytest.raises(TanError, match="INPUT.FEATURE_LENGTH_TOLERANCE"):
        load_config(TAN_SYNTHETIC, ["INPUT.FEATURE_LENGTH_TOLERANCE", "1.5"])


def test_prediction_refuses_new_sentences_for_a_model_on_sentence_features():
    cfg = load_config(TAN_SYNTHETIC, ["INPUT.SENTENCE_FEATURES", "True"])
    with pytest.raises(TanError, match="cannot encode new sentences"):
        sentence_encoder(cfg, declarations(cfg).text_input)
