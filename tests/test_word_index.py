"""The index of a whole GloVe text file (tan/data/text/word_index.py) and the
sentence encoder of prediction, which reads only that index."""
import logging
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tan.config import load_config
from tan.data import RunData, SentenceEncoder
from tan.data import formats as annotations_module
from tan.data.text import word_index
from tan.data.text.words import cached_word_vectors, read_word_vectors, tokenize
from tan.data.text.word_index import WordVectorIndex, index_folder
from tan.errors import TanError

from conftest import REPO, SYNTHETIC_CONFIG, file_size_limit

# A token with a space, a duplicated token (the first entry wins), a blank
# line, non-ASCII tokens, an empty token and tokens that share prefixes.
GLOVE = ("the 1 2 3\n"
         ". . 4 5 6\n"
         "\n"
         "at name@domain.com 7 8 9\n"
         "the 9 9 9\n"
         "théâtre 0.5 -0.25 1e-3\n"
         "  -1 -2 -3\n"
         "a 0.1 0.2 0.3\n"
         "ab 1.5 2.5 3.5\n"
         "abc -0.000001 1e10 -7\n"
         "ab 0 0 0\n"
         "Zebra 3 3 3\n")
WORDS = ["the", ". .", "at name@domain.com", "théâtre", " ", "a", "ab", "abc", "Zebra", ""]


def bits(vectors):
    return {w: v.view(np.uint32).tolist() for w, v in vectors.items()}


@pytest.fixture
def glove(tmp_path):
    path = tmp_path / "glove.txt"
    path.write_text(GLOVE, encoding="utf-8")
    return str(path), str(tmp_path / "cache")


def test_lookups_equal_read_word_vectors(glove):
    path, cache = glove
    index = WordVectorIndex.open(path, 3, cache)
    asked = WORDS + ["missing", "abcd", "th", "zebra", "\ud800"]
    expected = read_word_vectors(path, set(asked), 3)
    got = index.lookup(asked)
    assert bits(got) == bits(expected) and sorted(got) == sorted(expected)
    assert got["the"].tolist() == [1, 2, 3] and got["ab"].tolist() == [1.5, 2.5, 3.5]  # first entries won
    assert got[" "].tolist() == [-1, -2, -3]  # the line "  -1 -2 -3" holds the token " "
    assert len(index) == 9 and index.vectors.shape == (11, 3)  # 9 distinct tokens, 11 entries
    assert "at name@domain.com" in index and "missing" not in index and "zebra" not in index
    assert all(type(v) is np.ndarray and v.dtype == np.float32 and v.base is None for v in got.values())
    assert index.lookup([]) == {} and index.lookup(["nope"]) == {}
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(index.folder).st_mode & 0o777 == 0o777 & ~umask  # not mkdtemp's 0700


def test_many_random_words_equal_read_word_vectors(tmp_path):
    rng = np.random.default_rng(0)
    letters = list("abcdefgé'.-") + ["ß", "日本", " "]
    words = ["".join(rng.choice(letters, size=rng.integers(1, 7))).strip() or "x" for _ in range(3000)]
    values = rng.normal(scale=0.4, size=(len(words), 4))
    path = tmp_path / "glove.txt"
    path.write_text("".join(w + " " + " ".join(f"{x:.6g}" for x in row) + "\n" for w, row in zip(words, values)),
                    encoding="utf-8")
    index = WordVectorIndex.open(str(path), 4, str(tmp_path / "cache"))
    asked = set(words) | {w + "z" for w in words[:200]}
    assert bits(index.lookup(asked)) == bits(read_word_vectors(str(path), asked, 4))
    assert len(index) == len(set(words))


def test_a_second_open_reads_the_index_not_the_text_file(glove, monkeypatch, caplog):
    path, cache = glove
    first = WordVectorIndex.open(path, 3, cache).lookup(WORDS)
    # Same size and time, other numbers: a process that read the text file would see them.
    stat = os.stat(path)
    with open(path, "w", encoding="utf-8") as f:
        f.write(GLOVE.replace("1 2 3", "4 4 4"))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert os.stat(path).st_size == stat.st_size

    def no_reading(*args, **kwargs):
        raise AssertionError("the text file was read")

    monkeypatch.setattr(word_index, "glove_entries", no_reading)
    caplog.set_level(logging.INFO, logger="tan")
    index = WordVectorIndex.open(path, 3, cache)
    assert bits(index.lookup(WORDS)) == bits(first) and index.lookup(["the"])["the"].tolist() == [1, 2, 3]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in caplog.records if "opened" in r.getMessage()]


def test_a_changed_source_is_indexed_again_and_the_old_index_removed(glove):
    path, cache = glove
    old = index_folder(path, 3, cache)
    WordVectorIndex.open(path, 3, cache)
    with open(path, "a", encoding="utf-8") as f:
        f.write("new 5 5 5\n")
    index = WordVectorIndex.open(path, 3, cache)
    assert index.folder != old and index.lookup(["new"])["new"].tolist() == [5, 5, 5]
    assert not os.path.exists(old)
    stat = os.stat(path)  # only the time changes
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    again = WordVectorIndex.open(path, 3, cache)
    assert again.folder not in (old, index.folder) and "new" in again
    assert os.listdir(cache) == [os.path.basename(again.folder)]
    with pytest.raises(TanError, match="glove.txt:1: expected a word and 4 numbers"):
        WordVectorIndex.open(path, 4, cache)  # another vector size is another index (of a file that does not fit)


def replace_in(file, old, new):
    with open(file) as f:
        text = f.read()
    assert old in text
    with open(file, "w") as f:
        f.write(text.replace(old, new))


@pytest.mark.parametrize("damage", ["truncated vectors", "truncated words", "longer offsets", "no manifest",
                                    "bad manifest", "manifest of another file", "missing rows"])
def test_a_damaged_index_is_reported_and_built_again(glove, caplog, damage):
    path, cache = glove
    expected = bits(WordVectorIndex.open(path, 3, cache).lookup(WORDS))
    folder = index_folder(path, 3, cache)
    file, action = {
        "truncated vectors": ("vectors.npy", lambda f: os.truncate(f, os.path.getsize(f) - 4)),
        "truncated words": ("words.bin", lambda f: os.truncate(f, 3)),
        "longer offsets": ("offsets.npy", lambda f: open(f, "ab").write(b"\0" * 8)),
        "no manifest": ("manifest.json", os.unlink),
        "bad manifest": ("manifest.json", lambda f: open(f, "w").write("{not json")),
        "manifest of another file": ("manifest.json", lambda f: replace_in(f, '"size": ', '"size": 1')),
        "missing rows": ("rows.npy", os.unlink),
    }[damage]
    action(os.path.join(folder, file))
    caplog.set_level(logging.INFO, logger="tan")
    index = WordVectorIndex.open(path, 3, cache)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and f"{folder} is incomplete or damaged" in warnings[0] and "building it again" in warnings[0]
    assert bits(index.lookup(WORDS)) == expected
    assert sorted(os.listdir(cache)) == [os.path.basename(folder)]  # nothing left beside it
    caplog.clear()
    WordVectorIndex.open(path, 3, cache)
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]


def test_malformed_lines_name_file_and_line_and_leave_no_index(tmp_path):
    cache = tmp_path / "cache"
    short = tmp_path / "short.txt"
    short.write_text("a 1 2 3\n\nb 1 2\n")
    with pytest.raises(TanError, match="short.txt:3: expected a word and 3 numbers"):
        WordVectorIndex.open(str(short), 3, str(cache))
    words = tmp_path / "words.txt"
    words.write_text("a 1 2 3\nb 1 x 3\n")
    with pytest.raises(TanError, match="words.txt:2: the last 3 fields of the line are not numbers"):
        WordVectorIndex.open(str(words), 3, str(cache))
    assert os.listdir(cache) == []
    with pytest.raises(TanError, match="word-vector file .*nowhere.txt.*not found"):
        WordVectorIndex.open(str(tmp_path / "nowhere.txt"), 3, str(cache))


def test_an_unwritable_cache_folder_gives_an_index_in_memory(glove, tmp_path, caplog):
    path, _ = glove
    (tmp_path / "a_file").write_text("")
    caplog.set_level(logging.INFO, logger="tan")
    index = WordVectorIndex.open(path, 3, str(tmp_path / "a_file" / "cache"))
    assert index.folder is None
    assert bits(index.lookup(WORDS)) == bits(read_word_vectors(path, set(WORDS), 3))
    assert any("indexing" in r.getMessage() and "in memory" in r.getMessage()
               for r in caplog.records if r.levelno == logging.WARNING)


def test_a_failed_write_leaves_nothing_and_gives_an_index_in_memory(glove, caplog):
    path, cache = glove
    os.makedirs(cache)
    caplog.set_level(logging.INFO, logger="tan")
    with file_size_limit(100):  # vectors.npy cannot be written
        index = WordVectorIndex.open(path, 3, cache)
    assert index.folder is None and os.listdir(cache) == []
    assert bits(index.lookup(WORDS)) == bits(read_word_vectors(path, set(WORDS), 3))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and f"cannot write the word-vector index in {cache} (File too large)" in warnings[0]


def test_an_empty_file_gives_an_empty_index(tmp_path):
    path = tmp_path / "empty.txt"
    path.write_text("\n")
    index = WordVectorIndex.open(str(path), 3, str(tmp_path / "cache"))
    assert len(index) == 0 and index.lookup(["a"]) == {} and "a" not in index
    assert len(WordVectorIndex.open(str(path), 3, str(tmp_path / "cache"))) == 0


def test_an_abandoned_build_is_removed(glove):
    path, cache = glove
    os.makedirs(cache)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    name = os.path.basename(index_folder(path, 3, cache))
    abandoned = os.path.join(cache, f".{name}.{int(dead.stdout)}.abcd1234.tmp")
    os.makedirs(abandoned)
    WordVectorIndex.open(path, 3, cache)
    assert os.listdir(cache) == [name]


BUILD = textwrap.dedent("""
    import sys
    import numpy as np
    from tan.data.text.word_index import WordVectorIndex
    index = WordVectorIndex.open(sys.argv[1], 8, sys.argv[2])
    found = index.lookup(["w0", "w1999", "w12345"])
    print(len(index), sorted(found), float(sum(v.sum() for v in found.values())))
""")


@pytest.mark.slow
def test_two_processes_building_at_once_both_get_the_same_complete_index(tmp_path):
    path = tmp_path / "glove.txt"
    rng = np.random.default_rng(1)
    with open(path, "w") as f:
        for i in range(20000):
            f.write(f"w{i} " + " ".join(f"{x:.5f}" for x in rng.normal(size=8)) + "\n")
    cache = str(tmp_path / "cache")
    env = dict(os.environ, PYTHONPATH=REPO)
    procs = [subprocess.Popen([sys.executable, "-c", BUILD, str(path), cache], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outputs]
    assert outputs[0][0] == outputs[1][0] and outputs[0][0].startswith("20000 ['w0', 'w12345', 'w1999']")
    assert os.listdir(cache) == [os.path.basename(index_folder(str(path), 8, cache))]
    index = WordVectorIndex.open(str(path), 8, cache)
    assert bits(index.lookup(["w7", "w19999"])) == bits(read_word_vectors(str(path), {"w7", "w19999"}, 8))


def test_a_run_s_vocabulary_comes_from_an_existing_index_with_the_same_rows(glove, monkeypatch):
    path, cache = glove
    vocab = set(WORDS) | {"missing"}
    scanned = bits(cached_word_vectors(path, vocab, 3, cache))  # no index yet: the text file is read
    assert not any(name.endswith(".index") for name in os.listdir(cache))
    for name in os.listdir(cache):
        os.unlink(os.path.join(cache, name))
    WordVectorIndex.open(path, 3, cache)
    monkeypatch.setattr("tan.data.text.words.read_word_vectors", lambda *a: pytest.fail("the text file was scanned"))
    assert bits(cached_word_vectors(path, vocab, 3, cache)) == scanned


def synthetic_cfg(root, cache, *opts):
    return load_config(SYNTHETIC_CONFIG, ["DATASETS.ROOT", root, "DATASETS.CACHE_DIR", cache, *opts])


def test_sentence_encoder_gives_the_dataset_vocabulary_s_rows_without_reading_annotations(
        synthetic_root, tmp_path, monkeypatch, caplog):
    cfg = synthetic_cfg(synthetic_root, str(tmp_path / "cache"))
    vocabulary = RunData(cfg).text_input.vocabulary()
    monkeypatch.setattr(annotations_module, "load_annotations",
                        lambda *a, **k: pytest.fail("an annotation file was read"))
    caplog.set_level(logging.INFO, logger="tan")
    encoder = SentenceEncoder.from_config(cfg)
    sentences = ["Then the cook carefully opens the door again.", "a woman washes a cup", "someone zzyzx the knife"]
    for sentence, encoded in zip(sentences, encoder(sentences)):
        rows = vocabulary.matrix[vocabulary.encode(tokenize(sentence))]
        assert encoded.dtype == np.float32 and encoded.view(np.uint32).tolist() == rows.view(np.uint32).tolist()
    unknown = [r.getMessage() for r in caplog.records if "no word vector for" in r.getMessage()]
    assert len(unknown) == 2 and "cook, carefully" in unknown[0] and "zzyzx" in unknown[1]
    with pytest.raises(TanError, match="has no word with a word vector"):
        encoder(["cook carefully"])


def test_sentence_encoder_needs_no_annotation_file(tmp_path, monkeypatch):
    (tmp_path / "glove.txt").write_text("cut 1 2 3\nonion 4 5 6\n")
    monkeypatch.setattr(annotations_module, "load_annotations",
                        lambda *a, **k: pytest.fail("an annotation file was read"))
    # Configured datasets whose files do not exist
    cfg = load_config(SYNTHETIC_CONFIG, ["DATASETS.ROOT", str(tmp_path), "DATASETS.TRAIN", "('tacos_train',)",
                                         "DATASETS.VAL", "()", "DATASETS.TEST", "('tacos_test',)",
                                         "INPUT.WORD_VECTORS", "glove.txt", "INPUT.PRE_QUERY_SIZE", "3"])
    [encoded] = SentenceEncoder.from_config(cfg)(["Cut the onion"])
    np.testing.assert_array_equal(encoded, [[1, 2, 3], [0, 0, 0], [4, 5, 6]])
    assert os.listdir(tmp_path / "cache") == [os.path.basename(index_folder(str(tmp_path / "glove.txt"), 3,
                                                                            str(tmp_path / "cache")))]


def test_sentence_encoder_on_a_fresh_root_generates_the_synthetic_word_vectors(tmp_path, synthetic_root):
    cfg = synthetic_cfg(str(tmp_path / "root"), str(tmp_path / "cache"))
    [encoded] = SentenceEncoder.from_config(cfg)(["the person opens the door"])
    reference = read_word_vectors(os.path.join(synthetic_root, "synthetic", "word_vectors.txt"), {"opens"}, 300)
    assert encoded.shape == (5, 300) and encoded[2].tobytes() == reference["opens"].tobytes()


def test_training_vocabulary_is_the_same_with_and_without_an_index(synthetic_root, tmp_path, monkeypatch):
    scanned = RunData(synthetic_cfg(synthetic_root, str(tmp_path / "plain"))).text_input.vocabulary()
    cfg = synthetic_cfg(synthetic_root, str(tmp_path / "indexed"))
    SentenceEncoder.from_config(cfg)  # builds the index
    monkeypatch.setattr("tan.data.text.words.read_word_vectors", lambda *a: pytest.fail("the text file was scanned"))
    indexed = RunData(cfg).text_input.vocabulary()
    assert indexed.words == scanned.words and indexed.matrix.tobytes() == scanned.matrix.tobytes()
