"""What a hostile but realistic user tries, run as that user runs it (the tools'
own main and exit handling; as commands where processes and signals matter): a
one-line message naming the file or key and what to do, a truthful exit code,
and a folder that says what it holds. Those that train or start processes are
in the full suite."""
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest
import torch

from tan.engine import HookBase, Trainer, register_trainer
from tan.engine.trainer import TRAINERS
from tan.errors import TanError
from conftest import REPO, SYNTHETIC_CONFIG, run_main, run_tool, with_overrides

QUICK = ["MODEL.DEVICE", "cpu", "DATALOADER.NUM_WORKERS", "0", "SOLVER.LOG_PERIOD", "2", "SOLVER.TEST_PERIOD", "0",
         "SOLVER.ITERS_PER_EPOCH", "3", "SOLVER.MILESTONES", "(5,)"]


def train(root, out, *extra, config=SYNTHETIC_CONFIG):
    return run_main("train_net", "--config-file", config,
                    *with_overrides(["DATASETS.ROOT", root, "OUTPUT_DIR", str(out), *QUICK], *extra))


def refused(root, out, *extra, config=SYNTHETIC_CONFIG):
    """tan-train's main in this process, for a start that must be refused before any work."""
    return run_main("train_net", "--config-file", config,
                    *with_overrides(["DATASETS.ROOT", root, "OUTPUT_DIR", str(out), *QUICK], *extra))


def error_lines(proc):
    return [line for line in (proc.stdout + proc.stderr).splitlines()
            if " ERROR: " in line or line.startswith("error: ")]


def console(proc):
    return proc.stdout + proc.stderr


def one_error(proc, code=2):
    """The single error line of a tool that ended with ``code``, and no traceback."""
    assert proc.returncode == code, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr[-3000:]
    [line] = error_lines(proc)
    return line


# ---------------------------------------------------------------- configs and catalogs

def test_a_section_given_twice_stops_training_and_the_checker_naming_both_lines(synthetic_root, tmp_path):
    config = tmp_path / "twice.yaml"
    text = open(SYNTHETIC_CONFIG).read()
    config.write_text(text + "SOLVER:\n  LR: 0.5\n")
    first = 1 + text.splitlines().index("SOLVER:")
    second = len(text.splitlines()) + 1
    out = tmp_path / "out"
    line = one_error(refused(synthetic_root, out, config=str(config)))
    assert line.endswith(f"config file '{config}', line {second}: key 'SOLVER' is given a second time (first at "
                         f"line {first}); plain YAML would keep the last one and drop the first without a word; "
                         f"merge them into one")
    assert not out.exists()
    within = tmp_path / "within.yaml"
    within.write_text("SOLVER:\n  LR: 0.001\n  LR: 0.9\n")
    line = one_error(run_main("check_data", "--config-file", str(within), "DATASETS.ROOT", synthetic_root))
    assert "within.yaml', line 3: key 'LR' is given a second time (first at line 2)" in line


def test_config_and_catalog_files_that_are_not_utf8_or_not_files(synthetic_root, tmp_path):
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"# caf\xe9 settings\nSOLVER:\n  LR: 0.01\n")
    line = one_error(refused(synthetic_root, tmp_path / "out", config=str(latin)))
    assert line.endswith(f"config file '{latin}' is not UTF-8 text (byte 0xe9 on line 1); save it as UTF-8")
    line = one_error(refused(synthetic_root, tmp_path / "out", config=str(tmp_path)))
    assert line.endswith(f"config file '{tmp_path}' is a folder; expected a file")
    catalog = tmp_path / "catalog.yaml"
    catalog.write_bytes(b"mine:\n  annotations: \xff.json\n  features: f.hdf5\n")
    line = one_error(run_main("check_data", "--config-file", SYNTHETIC_CONFIG, "DATASETS.ROOT", synthetic_root,
                              "DATASETS.CATALOG", str(catalog)))
    assert f"dataset catalog file '{catalog}' (DATASETS.CATALOG) is not UTF-8 text (byte 0xff on line 2)" in line
    assert not (tmp_path / "out").exists()


def test_a_negative_learning_rate_is_refused_for_what_it_is(synthetic_root, tmp_path):
    line = one_error(refused(synthetic_root, tmp_path / "out", "SOLVER.LR", "-1"))
    assert line.endswith("config key SOLVER.LR: expected a positive learning rate, got -1.0")


def test_a_key_given_twice_on_the_command_line_is_refused_naming_both(synthetic_root, tmp_path):
    out = tmp_path / "out"
    proc = run_main("train_net", "--config-file", SYNTHETIC_CONFIG, "DATASETS.ROOT", synthetic_root, "OUTPUT_DIR",
                    str(out), "SOLVER.MAX_EPOCH", "1", "MODEL.DEVICE", "cpu", "SOLVER.MAX_EPOCH", "2")
    assert one_error(proc).endswith(
        "command line: SOLVER.MAX_EPOCH is given twice, as override 3 (SOLVER.MAX_EPOCH 1) and override 5 "
        "(SOLVER.MAX_EPOCH 2) of the KEY VALUE pairs; the second would replace the first without a word; give it once")
    assert not out.exists()
    # every tool reads overrides the same way; one that adds a key of its own (tan-test's OUTPUT_DIR for --ckpt)
    # sets the user's pair instead of giving the key a second time
    proc = run_main("check_data", "--config-file", SYNTHETIC_CONFIG, "PLUGINS", "[]", "PLUGINS", "['x']")
    assert "PLUGINS is given twice, as override 1 (PLUGINS []) and override 2 (PLUGINS ['x'])" in one_error(proc)


@pytest.mark.parametrize("value, expected", [
    ("(10,", "SOLVER.MILESTONES expects a list (default (8, 11)), got '(10,'; write a list as Python does and "
             "quote it for the shell, e.g. SOLVER.MILESTONES \"(8, 11)\" (one item: \"(8,)\"; none: \"()\")"),
    ("10", "SOLVER.MILESTONES expects a list (default (8, 11)), got '10'; write a list as Python does"),
])
def test_a_malformed_list_override_says_how_to_write_a_list(value, expected):
    line = one_error(run_main("check_data", "--config-file", SYNTHETIC_CONFIG, "SOLVER.MILESTONES", value))
    assert f"command line: {expected}" in line


def test_other_overrides_of_the_wrong_type_say_what_the_key_takes():
    from tan.config import load_config

    for key, value, expected in (("TENSORBOARD", "yes", "expects True or False (default False), got 'yes'"),
                                 ("SOLVER.MAX_EPOCH", "1.5", "expects a whole number (default 12), got '1.5'")):
        with pytest.raises(TanError, match=re.escape(f"command line: {key} {expected}")):
            load_config(SYNTHETIC_CONFIG, [key, value])
    # a string key takes what is typed as it is: a folder named 2024 is not the number 2024
    assert load_config(SYNTHETIC_CONFIG, ["OUTPUT_DIR", "2024"]).OUTPUT_DIR == "2024"
    assert load_config(SYNTHETIC_CONFIG, ["OUTPUT_DIR", "'runs/a b'"]).OUTPUT_DIR == "runs/a b"  # unquoted, as yacs
    assert load_config(SYNTHETIC_CONFIG, ["SOLVER.MILESTONES", "[3, 5]"]).SOLVER.MILESTONES == (3, 5)


@pytest.mark.parametrize("key, value, expected", [
    ("SOLVER.MAX_EPOCH", str(10 ** 30), f"expected a whole number of at most 2147483647 in size, got {10 ** 30}"),
    ("SOLVER.BATCH_SIZE", str(2 ** 31), "expected a whole number of at most 2147483647 in size, got 2147483648"),
    ("SEED", str(-2 ** 40), f"expected a whole number of at most 2147483647 in size, got {-2 ** 40}"),
    ("SOLVER.LR", "1e999", "expected a finite number, got inf"),
    ("SOLVER.MILESTONES", f"({10 ** 12},)", f"expected whole numbers of at most 2147483647 in size, got {10 ** 12}"),
    ("DATALOADER.NUM_WORKERS", "100000", "expected at most 1024, got 100000 (a count this large is a typo: each "
                                         "worker is a process; a machine has fewer cores)"),
    ("INPUT.NUM_PRE_CLIPS", "2000000000", "expected at most 65536, got 2000000000 (a count this large is a typo: "
                                          "each video is resampled to that many clips in memory)"),
    ("TEST.BATCH_SIZE", "2000000000", "expected at most 1048576, got 2000000000 (a count this large is a typo: the "
                                      "queries of one step, in memory at once)"),
])
def test_numbers_no_run_can_use_are_refused_before_anything_is_written(synthetic_root, tmp_path, key, value,
                                                                        expected):
    out = tmp_path / "out"
    line = one_error(run_main("train_net", "--config-file", SYNTHETIC_CONFIG, "DATASETS.ROOT", synthetic_root,
                              "OUTPUT_DIR", str(out), key, value))
    assert line.endswith(f"config key {key}: {expected}")
    assert not out.exists()


def test_the_eta_of_the_longest_run_allowed_is_written_and_not_a_crash():
    from tan.engine.hooks import duration_text

    assert duration_text(3725.9) == "1:02:05"
    assert duration_text(2 ** 31 * 2 ** 31 * 1.5) == "over 100 years"
    assert duration_text(float("nan")) == "over 100 years"


@pytest.mark.slow
def test_a_run_that_stops_before_its_first_checkpoint_leaves_no_config_and_the_corrected_command_runs(
        synthetic_root, tmp_path):
    """A diverging start (exit 3) wrote config.yml once training began; with nothing to resume from, the
    folder does not claim a run, so the next command with another learning rate is not refused."""
    out = tmp_path / "out"
    proc = train(synthetic_root, out, "SOLVER.LR", "1e30", "SOLVER.MAX_EPOCH", "1", "--skip-test")
    assert proc.returncode == 3, console(proc)[-3000:]
    assert "loss is nan at iteration" in console(proc) or "loss is inf at iteration" in console(proc)
    assert sorted(os.listdir(out)) == ["log.txt"]  # its config, history and loss records went with it
    proc = train(synthetic_root, out, "SOLVER.MAX_EPOCH", "1", "--skip-test")
    assert proc.returncode == 0, console(proc)[-3000:]
    assert (out / "config.yml").is_file() and (out / "model_final.pth").is_file()
    with open(out / "metrics.jsonl") as f:  # the corrected run's records alone, none of the diverged one
        records = [json.loads(line) for line in f]
    assert records and all(math.isfinite(r["loss"]) for r in records if "loss" in r)


@pytest.mark.parametrize("code, where, error", [
    ("import os\n\ndef broken(:\n    pass\n", "cannot be imported: {path}, line 3: SyntaxError: invalid syntax",
     "SyntaxError"),
    ("import os\n\n\ndef register():\n    raise ValueError('no config for me')\n\n\nregister()\n",
     "failed while it was imported: {path}, line 5: ValueError: no config for me", "raise ValueError"),
    ("import not_a_module_anywhere\n", "failed while it was imported: {path}, line 1: ModuleNotFoundError: No module "
                                       "named 'not_a_module_anywhere'", "import not_a_module_anywhere"),
    ("import sys\n\nsys.exit(0)\n", "failed while it was imported: {path}, line 3: it called sys.exit(0)",
     "sys.exit(0)"),
    ("import sys\nsys.exit('no GPU here')\n",
     "failed while it was imported: {path}, line 2: it called sys.exit('no GPU here')", "sys.exit('no GPU here')"),
])
def test_a_plugin_that_fails_to_import_is_one_line_naming_its_file_and_line_after_its_traceback(
        tmp_path, code, where, error):
    plugin = tmp_path / f"lab_model_{abs(hash(code)) % 10 ** 6}.py"
    plugin.write_text(code)
    proc = run_main("train_net", "--config-file", SYNTHETIC_CONFIG, "PLUGINS", f"['{plugin}']", "OUTPUT_DIR",
                    str(tmp_path / "out"))
    assert proc.returncode == 2
    lines = console(proc).strip().splitlines()
    assert lines[-1] == f"error: command line: PLUGINS: plug-in '{plugin}' " + where.format(path=plugin)
    assert error in console(proc)  # the plug-in's own traceback (or the line that does not compile) is shown first
    assert "tan/config/plugins.py" not in console(proc) and "importlib" not in console(proc)
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------- caches and failed starts

@pytest.mark.slow
def test_a_truncated_word_vector_cache_is_rebuilt_and_a_failed_start_leaves_no_config(synthetic_root, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(synthetic_root, root)
    shutil.rmtree(root / "cache", ignore_errors=True)  # other tests' vocabularies have theirs there
    proc = run_main("check_data", "--config-file", SYNTHETIC_CONFIG, "DATASETS.ROOT", str(root))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]  # it builds the datasets, so the cache
    [cache] = [root / "cache" / n for n in os.listdir(root / "cache") if n.startswith("word_vectors.")]
    cache.write_bytes(cache.read_bytes()[:500])
    out = tmp_path / "out"
    proc = train(str(root), out, "SOLVER.MAX_EPOCH", "1", "--skip-test")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"word-vector cache {cache} is damaged (the file is truncated or damaged" in console(proc)
    with np.load(cache) as data:  # written again, whole
        assert data["vectors"].shape[0] == len(data["words"]) > 0

    # A start that fails once the run folder is prepared (a bad line in the word-vector file) leaves no
    # config.yml that would claim the folder holds a run, nor a folder holding only its log: the console
    # says what happened.
    with open(root / "synthetic" / "word_vectors.txt", "a") as f:
        f.write("broken line\n")
    failed = tmp_path / "failed"
    line = one_error(train(str(root), failed, "SOLVER.MAX_EPOCH", "1"))
    assert "word_vectors.txt:" in line and "expected a word and 300 numbers" in line
    assert not failed.exists()


# ---------------------------------------------------------------- checkpoints

@pytest.fixture(scope="module")
def finished(synthetic_root, tmp_path_factory):
    """A finished two-epoch run."""
    out = tmp_path_factory.mktemp("finished") / "out"
    proc = train(synthetic_root, out, "SOLVER.MAX_EPOCH", "2", "--skip-test")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@pytest.mark.slow
def test_a_corrupt_final_model_is_written_again_by_the_rerun(finished, synthetic_root):
    final = finished / "model_final.pth"
    good = torch.load(final, weights_only=False)
    final.write_bytes(final.read_bytes()[:1000])
    proc = train(synthetic_root, finished, "SOLVER.MAX_EPOCH", "2", "--skip-test")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"{final} could not be read; written again from {finished / 'model_2e.pth'}" in console(proc)
    again = torch.load(final, weights_only=False)
    assert again.keys() == good.keys() and again["epoch"] == good["epoch"] == 3
    assert all(torch.equal(again["model"][k], v) for k, v in good["model"].items())
    assert (finished / "last_checkpoint").read_text() == "model_final.pth"
    proc = run_main("test_net", "--config-file", SYNTHETIC_CONFIG, "DATASETS.ROOT", synthetic_root, "OUTPUT_DIR",
                    str(finished), "MODEL.DEVICE", "cpu")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"evaluating {final}" in console(proc)


@pytest.mark.slow
def test_one_unreadable_checkpoint_of_several_stops_or_with_keep_going_is_left_out(finished, synthetic_root,
                                                                                    tmp_path):
    text = finished / "notes.pth"
    text.write_text("12 epochs, lr 0.01\n")
    ckpts = [str(finished / "model_1e.pth"), str(text), str(finished / "model_2e.pth")]
    common = ["DATASETS.ROOT", synthetic_root, "MODEL.DEVICE", "cpu", "OUTPUT_DIR", str(tmp_path / "eval")]
    line = one_error(run_main("test_net", "--ckpt", *ckpts, *common))
    assert line.endswith(f"checkpoint '{text}' cannot be read: it is not a file that torch.save wrote; nothing was "
                         f"evaluated (pass --keep-going to evaluate the others)")
    assert not (tmp_path / "eval").exists()
    proc = run_main("test_net", "--ckpt", *ckpts, "--keep-going", *common)
    line = one_error(proc)
    assert line.endswith(f"evaluated 2 of 3 checkpoints; left out (--keep-going): checkpoint '{text}' cannot be "
                         f"read: it is not a file that torch.save wrote")
    results = tmp_path / "eval" / "inference"
    assert sorted(os.listdir(results)) == ["comparison.csv", "comparison.json", "left_out.json", "model_1e",
                                           "model_2e"]
    assert [row["checkpoint"] for row in json.loads((results / "comparison.json").read_text())] == [ckpts[0],
                                                                                                     ckpts[2]]
    [left_out] = json.loads((results / "left_out.json").read_text())
    assert left_out == {"checkpoint": str(text), "why": f"checkpoint '{text}' cannot be read: it is not a file that "
                                                        f"torch.save wrote"}
    text.unlink()


def copied_run(finished, tmp_path):
    """The finished run copied as ``cp -r`` copies it: file times are not kept (every file is newer than
    it was, in the order the copy made them)."""
    copy = tmp_path / "copy"
    shutil.copytree(finished, copy, copy_function=shutil.copyfile, ignore=shutil.ignore_patterns("run.lock"))
    return copy


@pytest.mark.parametrize("marker, problem", [
    (b"\xff\xfemodel_2e.pth", "is not UTF-8 text (byte 0xff at offset 0); it should hold the file name of the "
                             "latest checkpoint"),
    (b"", "is empty; it should hold the file name of the latest checkpoint"),
    (b"model_9e.pth\n", "names 'model_9e.pth', which is not there"),
])
@pytest.mark.slow
def test_a_bad_last_checkpoint_file_is_named_and_training_and_testing_fall_back(finished, synthetic_root, tmp_path,
                                                                                marker, problem):
    run = copied_run(finished, tmp_path)
    (run / "last_checkpoint").write_bytes(marker)
    expected = f"{run / 'last_checkpoint'} {problem}; falling back to the latest readable checkpoint in training " \
               f"order, {run / 'model_final.pth'}"
    proc = run_main("test_net", "--config-file", SYNTHETIC_CONFIG, "DATASETS.ROOT", synthetic_root, "OUTPUT_DIR",
                    str(run), "MODEL.DEVICE", "cpu")
    assert proc.returncode == 0, console(proc)[-3000:]
    assert expected in console(proc) and f"evaluating {run / 'model_final.pth'}" in console(proc)
    before = {n: (run / n).read_bytes() for n in ("model_1e.pth", "model_2e.pth", "model_final.pth")}
    proc = train(synthetic_root, run, "SOLVER.MAX_EPOCH", "2", "--skip-test")
    assert proc.returncode == 0, console(proc)[-3000:]
    assert expected in console(proc) and "holds all 2 epochs: nothing to train" in console(proc)
    assert {n: (run / n).read_bytes() for n in before} == before
    assert (run / "last_checkpoint").read_text() == "model_final.pth"  # names a checkpoint again


@pytest.mark.slow
def test_the_fallback_follows_training_progress_not_file_times(finished, synthetic_root, tmp_path):
    run = copied_run(finished, tmp_path)
    final = run / "model_final.pth"
    final.write_bytes(final.read_bytes()[:1000])  # truncated
    os.utime(run / "model_1e.pth")  # the newest file now, and the earliest in training
    epoch_1 = (run / "model_1e.pth").read_bytes()
    proc = train(synthetic_root, run, "SOLVER.MAX_EPOCH", "2", "--skip-test")
    assert proc.returncode == 0, console(proc)[-3000:]
    assert f"falling back to the latest readable checkpoint in training order, {run / 'model_2e.pth'}" in console(proc)
    assert f"{final} could not be read; written again from {run / 'model_2e.pth'}" in console(proc)
    assert "start training" not in console(proc)
    assert (run / "model_1e.pth").read_bytes() == epoch_1


@pytest.mark.slow
def test_a_last_checkpoint_naming_an_earlier_checkpoint_than_a_readable_later_one_is_refused(finished,
                                                                                           synthetic_root, tmp_path):
    run = copied_run(finished, tmp_path)
    (run / "last_checkpoint").write_text("model_1e.pth")
    (run / "log.txt").unlink()  # the refused run's own log is taken back, though the folder holds a run
    before = {n: (run / n).read_bytes() for n in os.listdir(run) if n.endswith(".pth")}
    line = one_error(train(synthetic_root, run, "SOLVER.MAX_EPOCH", "2", "--skip-test"))
    assert not (run / "log.txt").exists()
    assert line.endswith(f"{run / 'last_checkpoint'} names model_1e.pth (saved after epoch 1), but model_final.pth, "
                         f"saved later in training (after epoch 2), is there and readable: resuming would train those "
                         f"steps again and overwrite it. Write 'model_final.pth' into last_checkpoint to resume from "
                         f"it, or move the later checkpoints away to go back")
    assert {n: (run / n).read_bytes() for n in before} == before


# ---------------------------------------------------------------- prediction inputs

@pytest.mark.slow
def test_prediction_names_the_line_of_an_unknown_video_and_a_text_file_named_npy(finished, tmp_path):
    queries = tmp_path / "queries.jsonl"
    queries.write_text('{"vid": "syn_test_0000", "query": "the person opens the door"}\n'
                       '{"vid": "no_such_video", "query": "the person opens the door"}\n')
    line = one_error(run_main("predict", "--ckpt", str(finished / "model_final.pth"), "--queries", str(queries)))
    assert f"{queries}:2: video 'no_such_video' is in none of the configured feature files" in line
    fake = tmp_path / "clip.npy"
    fake.write_text("0.1 0.2 0.3\n")
    line = one_error(run_main("predict", "--ckpt", str(finished / "model_final.pth"), "--features", str(fake),
                              "--duration", "10", "--query", "the person opens the door"))
    assert line.endswith(f"--features: '{fake}' cannot be read: not a .npy file (it does not start with NumPy's "
                         f"header); write it with numpy.save")
    assert "pickle" not in line


@pytest.mark.slow
def test_prediction_from_a_text_file_given_as_features_says_what_features_are(finished, tmp_path):
    text = tmp_path / "features.txt"
    text.write_text("0.1 0.2\n")
    line = one_error(run_main("predict", "--ckpt", finished / "model_final.pth", "--features", text,
                              "--query", "the person opens the door"))
    assert line.endswith(f"feature file '{text}' is not an HDF5 file; features are an HDF5 file, a folder of "
                         f"per-video .npy / .npz files, or (for one video) a .npy or .npz file")


@pytest.mark.slow
def test_prediction_on_features_with_nan_names_the_video_the_file_and_the_rows(finished, synthetic_root, tmp_path):
    """tan-predict said "the video's features hold NaN or infinite values", naming neither the video nor
    its file (tan-test names them)."""
    ckpt = str(finished / "model_final.pth")
    from tan.config import load_config
    width = load_config(SYNTHETIC_CONFIG).MODEL.TAN.FEATPOOL.INPUT_SIZE
    rows = np.random.default_rng(0).normal(size=(40, width)).astype(np.float32)
    rows[[7, 9, 30]] = np.nan
    rows[30, 0] = np.inf
    features = tmp_path / "f.h5"
    with h5py.File(features, "w") as f:
        f["v1"] = rows
    single = tmp_path / "v1.npy"
    np.save(single, rows)
    line = one_error(run_main("predict", "--ckpt", ckpt, "--features", str(features), "--video", "v1", "--duration",
                              "20", "--query", "the person opens the door"))
    assert line.endswith(f"video 'v1' in --features '{features}' holds NaN or infinite values in 3 of its 40 feature "
                         f"rows (first: row 7); extract that video's features again")
    line = one_error(run_main("predict", "--ckpt", ckpt, "--features", str(single), "--duration", "20", "--query",
                              "the person opens the door"))
    assert line.endswith(f"--features '{single}' holds NaN or infinite values in 3 of its 40 feature rows (first: "
                         f"row 7); extract that video's features again")


@pytest.mark.slow
def test_the_unknown_words_of_a_long_query_are_named_once_each_and_cut(finished):
    words = [f"zzq{k % 40}" for k in range(5000)]  # 40 unknown words, each 125 times
    sentence = " ".join(["the", "person", "opens", "the", "door"] + words)
    proc = run_main("predict", "--ckpt", finished / "model_final.pth", "--video", "syn_test_0000",
                    "--query", sentence)
    assert proc.returncode == 0, console(proc)[-3000:]
    [warning] = [line for line in console(proc).splitlines() if "no word vector for" in line]
    assert warning.endswith(f"{sentence[:80]!r}... ({len(sentence)} characters): no word vector for "
                            f"{', '.join(f'zzq{k}' for k in range(10))} and 30 more (zero vectors used)")
    assert len(warning) < 400


@pytest.mark.slow
def test_an_empty_or_blank_sentence_is_refused_with_the_same_words_everywhere(finished, tmp_path):
    words = "has no word: give a sentence to ground, with at least one word"
    for sentence in ("", "   ", "?!"):
        line = one_error(run_main("predict", "--ckpt", finished / "model_final.pth", "--video", "syn_test_0000",
                                  "--query", "the door", "--query", sentence))
        assert line.endswith(f"--query 2 {sentence!r} {words}")
    queries = tmp_path / "queries.jsonl"
    queries.write_text('{"vid": "syn_test_0000", "query": " "}\n')
    assert one_error(run_main("predict", "--ckpt", finished / "model_final.pth", "--queries", queries)).endswith(
        f"{queries}:1: the query ' ' {words}")
    import tan

    model = tan.load_model(str(finished / "model_final.pth"))
    video = model.encode_video(np.zeros((20, 128), np.float32) + 0.1, 30.0)
    with pytest.raises(TanError, match=re.escape(f"sentence 2 '' {words}")):
        model.ground(video, ["the door", ""])


def test_the_checker_names_only_the_dataset_whose_annotation_file_is_unreadable(synthetic_root, tmp_path):
    data = os.path.join(synthetic_root, "synthetic")
    broken = tmp_path / "test.json"
    broken.write_text('{"broken')
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(f"p_train:\n  annotations: {data}/annotations/train.json\n  features: "
                       f"{data}/features/synthetic_features.hdf5\n  format: seconds\n"
                       f"p_test:\n  annotations: {broken}\n  features: {data}/features/synthetic_features.hdf5\n"
                       f"  format: seconds\n")
    proc = run_main("check_data", "--config-file", SYNTHETIC_CONFIG, "DATASETS.ROOT", synthetic_root,
                    "DATASETS.CATALOG", catalog, "DATASETS.TRAIN", "('p_train',)", "DATASETS.VAL", "()",
                    "DATASETS.TEST", "('p_test',)")
    assert proc.returncode == 1  # the checker's "problems found"
    report = console(proc)
    assert "1 problem(s) would stop training:" in report
    assert f"  - p_test: annotation file '{broken}' is not valid JSON" in report
    assert "p_train: annotation file" not in report
    assert "(not built: the annotations of p_test could not be read (above))" in report
    assert "not checked, the annotations of p_test could not be read" in report


# ---------------------------------------------------------------- conversions stopped from outside

@pytest.fixture(scope="module")
def many_videos(tmp_path_factory):
    """An HDF5 file of enough videos that a conversion takes a while."""
    path = tmp_path_factory.mktemp("many") / "many.hdf5"
    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as f:
        for k in range(3000):
            f.create_dataset(f"v{k:04d}", data=rng.random((40, 64), dtype=np.float32))
    return path


def convert_in_background(src, dst, console):
    with open(console, "w") as f:
        return subprocess.Popen([sys.executable, os.path.join(REPO, "tools", "convert_features.py"), str(src),
                                 str(dst), "--format", "npz"], stdout=f, stderr=subprocess.STDOUT, text=True,
                                env=dict(os.environ, PYTHONUNBUFFERED="1"), start_new_session=True)


def temporaries(folder):
    return sorted(n for n in os.listdir(folder) if ".tmp" in n)


def wait_for_temporary(folder, proc):
    deadline = time.monotonic() + 120
    while not temporaries(folder):
        assert proc.poll() is None and time.monotonic() < deadline, "the conversion wrote no temporary copy"
        time.sleep(0.02)


@pytest.mark.slow
def test_sigterm_and_sigkill_during_a_conversion_leave_no_temporaries_behind(many_videos, tmp_path):
    dst = tmp_path / "dst"
    proc = convert_in_background(many_videos, dst, tmp_path / "term.txt")
    wait_for_temporary(tmp_path, proc)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 143
    output = (tmp_path / "term.txt").read_text()
    assert output.strip().splitlines()[-1] == (f"warning: terminated (SIGTERM) while converting features; nothing "
                                               f"was written to {dst} and the partial copy is removed")
    assert "Traceback" not in output and not dst.exists() and temporaries(tmp_path) == []

    proc = convert_in_background(many_videos, dst, tmp_path / "kill.txt")
    wait_for_temporary(tmp_path, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=120)
    [left] = temporaries(tmp_path)  # nothing can clean up after SIGKILL ...
    proc = run_tool("convert_features", str(many_videos), str(dst), "--format", "npz")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"cleared what a killed conversion had left: removed {tmp_path / left}" in proc.stdout
    assert temporaries(tmp_path) == [] and len(os.listdir(dst)) == 3000  # ... but the next conversion does


# ================================================================ sentence features with NaN or inf,
# Ego4D NLQ's duplicate ids and the queries its figures count

TEXT_WIDTH, VIDEO_WIDTH = 5, 6


def text_feature_data(root, storage, bad_value):
    """A JSON-lines dataset "nan_test" of four queries (qids 0..3) whose sentence features are one HDF5
    file keyed by qid (``storage`` "hdf5", as MAD ships them) or a folder of qid{qid}.npz files
    (lighthouse's); query 2's features hold ``bad_value`` in one of their 7 rows. Returns the file
    that holds query 2's features."""
    rng = np.random.default_rng(0)
    (root / "video").mkdir(parents=True)
    records = []
    for q in range(4):
        np.save(root / "video" / f"v{q}.npy", rng.normal(size=(20, VIDEO_WIDTH)).astype(np.float32))
        records.append({"qid": q, "query": "the person opens the door", "vid": f"v{q}", "duration": 20.0,
                        "relevant_windows": [[2, 6]]})
    (root / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    rows = {q: rng.normal(size=(7, TEXT_WIDTH)).astype(np.float32) for q in range(4)}
    rows[2][3, 1] = bad_value
    if storage == "hdf5":
        text = root / "text.h5"
        with h5py.File(text, "w") as h5:
            for q, r in rows.items():
                h5.create_dataset(str(q), data=r)
        bad = text
    else:
        text = root / "text"
        text.mkdir()
        for q, r in rows.items():
            np.savez(text / f"qid{q}.npz", last_hidden_state=r.astype(np.float16))
        bad = text / "qid2.npz"
    (root / "catalog.yaml").write_text(json.dumps({"nan_test": {
        "annotations": "queries.jsonl", "format": "jsonl", "features": "video", "text_features": text.name}}))
    return bad


def text_feature_options(root):
    return ["DATASETS.ROOT", str(root), "DATASETS.CATALOG", "catalog.yaml", "INPUT.SENTENCE_FEATURES", "True",
            "INPUT.PRE_QUERY_SIZE", str(TEXT_WIDTH), "MODEL.TAN.FEATPOOL.INPUT_SIZE", str(VIDEO_WIDTH),
            "DATASETS.TRAIN", "('nan_test',)", "DATASETS.VAL", "()", "DATASETS.TEST", "('nan_test',)",
            "MODEL.DEVICE", "cpu", "DATALOADER.NUM_WORKERS", "0"]


@pytest.mark.parametrize("storage, bad_value", [("hdf5", np.nan), ("folder", np.inf)])
def test_sentence_features_with_nan_or_inf_are_refused_by_every_tool_naming_the_file_and_the_query(
        tmp_path, storage, bad_value):
    """A NaN row made every score of its query NaN: tan-test exited 0 with every metric 0.00 and
    tan-check-data found no problem. Each tool now refuses the dataset in one line."""
    root = tmp_path / "data"
    bad = text_feature_data(root, storage, bad_value)
    where = f"'{bad}', query '2'" if storage == "hdf5" else f"'{bad}' (query '2')"
    expected = (f"dataset 'nan_test': {where} holds sentence features with NaN or infinite values (1 of its 7 "
                f"rows); extract that query's features again, or remove them so that the query is left out and "
                f"counted ('query without sentence features')")
    options = text_feature_options(root)
    report = tmp_path / "report.json"
    proc = run_main("check_data", "--config-file", SYNTHETIC_CONFIG, "--json", str(report), *options)
    assert proc.returncode == 1, console(proc)[-3000:]  # the checker's "problems found"
    assert json.loads(report.read_text())["problems"] == [f"nan_test: {expected}"]
    assert "no problem found" not in console(proc)
    out = tmp_path / "test"
    assert one_error(run_main("test_net", "--config-file", SYNTHETIC_CONFIG, *options, "OUTPUT_DIR",
                              str(out))).endswith(expected)
    assert not (out / "inference").exists()  # no metrics.json of zeros
    assert one_error(train(str(root), tmp_path / "train", *options, "SOLVER.MAX_EPOCH", "1")).endswith(expected)


def test_word_vectors_with_nan_are_refused_in_training_and_in_prediction(tmp_path):
    """The same fault in a GloVe text file ("nan" parses as a number): refused where the word is used."""
    from tan.data.text.free_text import SentenceEncoder

    root = tmp_path / "data"
    text_feature_data(root, "hdf5", 0.0)
    words = ["the", "person", "opens", "door"]
    lines = [" ".join([w] + [("nan" if w == "door" and k == 2 else f"0.{k + 1}") for k in range(TEXT_WIDTH)])
             for w in words]
    (root / "vectors.txt").write_text("\n".join(lines) + "\n")
    options = text_feature_options(root)
    options[options.index("INPUT.SENTENCE_FEATURES") + 1] = "False"
    expected = (f"word-vector file '{root / 'vectors.txt'}': the vector of 'door' holds NaN or infinite values; "
                f"correct its line, or remove it so that the word is unknown")
    report = tmp_path / "report.json"
    proc = run_main("check_data", "--config-file", SYNTHETIC_CONFIG, "--json", str(report), *options,
                    "INPUT.WORD_VECTORS", "vectors.txt")
    assert proc.returncode == 1, console(proc)[-3000:]
    assert json.loads(report.read_text())["problems"] == [f"nan_test: {expected}"]
    assert one_error(train(str(root), tmp_path / "train", *options, "INPUT.WORD_VECTORS", "vectors.txt",
                           "SOLVER.MAX_EPOCH", "1")).endswith(expected)
    encoder = SentenceEncoder(str(root / "vectors.txt"), TEXT_WIDTH, str(tmp_path / "cache"))  # tan-predict's
    assert len(encoder(["the person opens"])) == 1
    with pytest.raises(TanError, match=re.escape(expected)):
        encoder(["the person opens the door"])


@pytest.fixture(scope="module")
def nlq_faults(tmp_path_factory):
    """An Ego4D NLQ stand-in whose validation file has these faults: an annotation of the first
    clip given again in the second (its annotation_uid twice), a window that ends before it starts and a
    query without text in the second clip, and a third clip without features. Returns (root, the
    validation file, its content, the clip without features)."""
    from tan.data.catalog import builtin_entries
    from tan_apps.nlq_standin import make_nlq_standin

    root = tmp_path_factory.mktemp("nlq_faults")
    make_nlq_standin(str(root), dim=32, seed=0, clips_per_split={"train": 2, "val": 3})
    entry = builtin_entries()["ego4d_nlq_val"]
    path = root / entry["annotations"]
    data = json.loads(path.read_text())
    first, second, featureless = [c for v in data["videos"] for c in v["clips"]]
    largest = max(first["annotations"], key=lambda a: len(a["language_queries"]))
    faulty = max(second["annotations"], key=lambda a: len(a["language_queries"]))  # of three queries or more
    faulty["language_queries"][0].update(query="where is the cup?", clip_start_sec=40.0, clip_end_sec=30.0)
    faulty["language_queries"][1].update(query="  ")
    second["annotations"].append(dict(largest, language_queries=[dict(q, query="where is the knife?")
                                                                 for q in largest["language_queries"][:2]]))
    path.write_text(json.dumps(data))
    with h5py.File(root / entry["features"], "a") as h5:
        del h5[featureless["clip_uid"]]
    return root, path, data, featureless


def nlq_options(root):
    from conftest import SMALL_2DTAN, STANDIN_RUN

    return ["--config-file", os.path.join(REPO, "configs", "2dtan_ego4d_nlq.yaml"), "DATASETS.ROOT", str(root),
            *SMALL_2DTAN, *STANDIN_RUN]


def test_nlq_duplicate_ids_and_queries_left_out_are_named_and_every_query_with_a_sentence_is_counted(
        nlq_faults, tmp_path):
    """A duplicate annotation_uid was accepted (two submission entries of one annotation_uid and
    query_idx); a clip without features dropped its queries from NLQ-queries; queries without text or
    with a reversed window were counted without a name."""
    root, path, data, featureless = nlq_faults
    first, second, _ = [c for v in data["videos"] for c in v["clips"]]
    duplicate, faulty = second["annotations"][-1]["annotation_uid"], max(
        second["annotations"][:-1], key=lambda a: len(a["language_queries"]))["annotation_uid"]
    with_text = sum(1 for c in (first, second, featureless) for a in c["annotations"] for q in a["language_queries"]
                    if q.get("query", "").strip())
    in_featureless = sum(1 for a in featureless["annotations"] for q in a["language_queries"]  # those read
                         if q.get("query", "").strip() and q["clip_end_sec"] > q["clip_start_sec"])
    out = tmp_path / "test"
    proc = run_main("test_net", *nlq_options(root), "OUTPUT_DIR", str(out))
    assert proc.returncode == 0, console(proc)[-3000:]
    text = console(proc)
    # item 6: the later annotation of one uid is left out and counted, as the jsonl reader does a qid seen before
    assert (f"annotation file '{path}': 2 queries left out (annotation_uid seen before in the file): "
            f"'{duplicate}' in clip '{second['clip_uid']}' (first in clip '{first['clip_uid']}'); the first "
            f"annotation of each annotation_uid is kept; give each annotation its own annotation_uid") in text
    # item 8: the queries left out are named by file, annotation_uid and index
    assert (f"annotation file '{path}': 1 query left out (query window that ends before it starts): "
            f"'{faulty}' query 0; scored as misses, as the NLQ evaluator scores them") in text
    without_text = [f"'{a['annotation_uid']}' query {i}" for c in (first, second, featureless) for a in c["annotations"]
                    for i, q in enumerate(a["language_queries"]) if not q.get("query", "").strip()]
    assert f"'{faulty}' query 1" in without_text  # the stand-in has some of its own, as the release has
    assert (f"annotation file '{path}': {len(without_text)} queries left out (query without text): "
            f"{', '.join(without_text)}; NLQ-queries does not count them") in text
    folder = out / "inference" / "untrained" / "ego4d_nlq_val"
    submission = json.loads((folder / "ego4d_nlq_val_submission.json").read_text())["results"]
    keys = [(r["annotation_uid"], r["query_idx"]) for r in submission]
    assert len(keys) == len(set(keys)) and featureless["clip_uid"] not in {r["clip_uid"] for r in submission}
    # item 8: every query with a sentence is in NLQ-queries, those of the clip without features as misses
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["NLQ-queries"] == with_text > len(submission)
    assert (f"ego4d_nlq_val: {in_featureless + 2} of the {with_text} queries of '{path}' could not be evaluated "
            f"(annotation_uid seen before in the file 2, video missing from the feature file {in_featureless}) and "
            f"count as misses in the NLQ figures, which are over every query of the file; tan-check-data says what "
            f"left them out") in text


def test_the_checker_counts_and_names_the_nlq_queries_left_out(nlq_faults, tmp_path):
    root, path, data, featureless = nlq_faults
    report = tmp_path / "report.json"
    proc = run_main("check_data", "--json", str(report), *nlq_options(root))
    assert proc.returncode == 0, console(proc)[-3000:]  # queries left out do not stop training; they are listed
    [val] = [d for d in json.loads(report.read_text())["datasets"] if d["name"] == "ego4d_nlq_val"]
    assert val["dropped"]["annotation_uid seen before in the file"] == 2
    assert val["dropped"]["query window that ends before it starts"] == 1
    assert val["without_features"] == [featureless["clip_uid"]]
    assert f"annotation file '{path}': 2 queries left out (annotation_uid seen before in the file)" in console(proc)


def test_mad_queries_of_a_movie_without_features_count_as_misses_and_faults_are_named(tmp_path):
    """The same class in MAD: MAD-queries counts every query of the file with a sentence and a movie (a movie
    without features, as a clip without features in NLQ, counts its queries as misses), and a query left out
    for a fault of the file is named by its id."""
    from conftest import SMALL_2DTAN, STANDIN_RUN
    from tan.data.catalog import builtin_entries
    from tan_apps.mad_standin import make_mad_standin

    root = tmp_path / "mad"
    make_mad_standin(str(root), dim=32, seed=0, movies_per_split={"train": 1, "val": 1, "test": 2},
                     queries_per_movie={"train": 4, "val": 1, "test": 2}, minutes=(2, 3))
    entries = builtin_entries()
    path = root / entries["mad_test"]["annotations"]
    data = json.loads(path.read_text())
    movies = sorted({r["movie"] for r in data.values()})
    reversed_qid = next(q for q, r in data.items() if r["movie"] == movies[0])
    data[reversed_qid]["ext_timestamps"] = [20.0, 10.0]
    path.write_text(json.dumps(data))
    with h5py.File(root / entries["mad_test"]["features"], "a") as h5:
        del h5[movies[1]]
    out = tmp_path / "test"
    proc = run_main("test_net", "--config-file", os.path.join(REPO, "configs", "2dtan_mad.yaml"), "DATASETS.ROOT",
                    str(root), "OUTPUT_DIR", str(out), *SMALL_2DTAN, *STANDIN_RUN)
    assert proc.returncode == 0, console(proc)[-3000:]
    assert (f"annotation file '{path}': 1 query left out (query window that ends before it starts): "
            f"'{reversed_qid}'; scored as misses") in console(proc)
    metrics = json.loads((out / "inference" / "untrained" / "mad_test" / "metrics.json").read_text())
    assert metrics["MAD-queries"] == len(data) == 4 and metrics["num_queries"] == 1
    assert (f"mad_test: 2 of the 4 queries of '{path}' could not be evaluated (video missing from the feature "
            f"file 2) and count as misses in the MAD figures, which are over every query of the file") in console(proc)


def test_a_plugin_format_with_ids_that_returns_one_qid_twice_is_refused_naming_the_reader(tmp_path):
    """Every reader whose format has ids is held to unique ids, a plug-in's too: two records of one qid
    would share the query's sentence features and its line of a submission file."""
    root = tmp_path / "data"
    text_feature_data(root, "hdf5", 0.0)
    plugin = tmp_path / "repeated_qids.py"
    plugin.write_text(
        "import json\n"
        "from tan.data.formats import Query, register_format\n\n\n"
        "@register_format('repeated_qids', query_ids=True)\n"
        "def read(path, durations, counts):\n"
        "    records = [json.loads(line) for line in open(path)]\n"
        "    return [Query(r['vid'], r['duration'], *r['relevant_windows'][0], r['query'], qid='same') "
        "for r in records]\n")
    catalog = json.loads((root / "catalog.yaml").read_text())
    catalog["nan_test"]["format"] = "repeated_qids"
    (root / "catalog.yaml").write_text(json.dumps(catalog))
    report = tmp_path / "report.json"
    # in a process of its own: the plug-in's format stays registered in the process that imports it
    proc = run_tool("check_data", "--config-file", SYNTHETIC_CONFIG, "--json", str(report), "PLUGINS",
                    repr([str(plugin)]), *map(str, text_feature_options(root)))
    assert proc.returncode == 1, console(proc)[-3000:]
    assert json.loads(report.read_text())["problems"] == [
        f"nan_test: annotation format 'repeated_qids': its reader repeated_qids.read returned a record "
        f"that breaks the Query guarantees of docs/data.md §11.2 (record 2 of '{root / 'queries.jsonl'}': its qid "
        f"'same' is that of record 1); a reader counts such records and leaves them out"]


# ---------------------------------------------------------------- checkpoints that are not this run's,
# seeds, refused starts

MMN_SYNTHETIC = os.path.join(REPO, "configs", "mmn_synthetic.yaml")


@pytest.fixture(scope="module")
def mmn_checkpoint(synthetic_root, tmp_path_factory):
    """A checkpoint of another model than `finished`'s 2D-TAN: MMN's, after one short epoch."""
    out = tmp_path_factory.mktemp("mmn") / "out"
    proc = train(synthetic_root, out, "SOLVER.MAX_EPOCH", "1", "--skip-test", config=MMN_SYNTHETIC)
    assert proc.returncode == 0, console(proc)[-3000:]
    return out / "model_1e.pth"


def checkpoint_files(run):
    return {n: (run / n).read_bytes() for n in os.listdir(run) if n.endswith(".pth")}


@pytest.mark.slow
def test_a_renamed_checkpoint_is_compared_with_the_others_not_itself_and_named_for_what_it_holds(
        finished, synthetic_root, tmp_path):
    run = copied_run(finished, tmp_path)
    (run / "model_1e.pth").rename(run / "model_3e.pth")
    (run / "last_checkpoint").write_text("model_3e.pth")
    before = checkpoint_files(run)
    line = one_error(train(synthetic_root, run, "SOLVER.MAX_EPOCH", "2", "--skip-test"))
    assert line.endswith(f"{run / 'last_checkpoint'} names model_3e.pth (saved after epoch 1, though its name says "
                         f"after epoch 3), but model_final.pth, saved later in training (after epoch 2), is there and "
                         f"readable: resuming would train those steps again and overwrite it. Write 'model_final.pth' "
                         f"into last_checkpoint to resume from it, or move the later checkpoints away to go back")
    # the advice leads on: the renamed file is named for what it holds, with the name training gives it
    (run / "last_checkpoint").write_text("model_final.pth")
    line = one_error(train(synthetic_root, run, "SOLVER.MAX_EPOCH", "2", "--skip-test"))
    assert line.endswith(f"model_3e.pth's name says it was saved after epoch 3, but it holds the state after epoch 1; "
                         f"resuming from model_final.pth (saved after epoch 2) would write over it when training "
                         f"reaches that point. A run folder holds the checkpoints of one run: move model_3e.pth out "
                         f"of {run} (or rename it model_1e.pth, the name training gives it)")
    assert checkpoint_files(run) == before
    (run / "model_3e.pth").rename(run / "model_1e.pth")
    proc = train(synthetic_root, run, "SOLVER.MAX_EPOCH", "2", "--skip-test")
    assert proc.returncode == 0 and "holds all 2 epochs: nothing to train" in console(proc), console(proc)[-3000:]

    # the renamed file alone: what to call it, and what to write into last_checkpoint
    alone = copied_run(finished, tmp_path / "alone")
    for name in ("model_2e.pth", "model_final.pth"):
        (alone / name).unlink()
    (alone / "model_1e.pth").rename(alone / "model_3e.pth")
    (alone / "last_checkpoint").write_text("model_3e.pth")
    line = one_error(train(synthetic_root, alone, "SOLVER.MAX_EPOCH", "2", "--skip-test"))
    assert line.endswith(f"{alone / 'last_checkpoint'} names model_3e.pth, whose name says it was saved after epoch "
                         f"3, but it holds the state after epoch 1 (was it renamed?): resuming from it would save "
                         f"later checkpoints over it. Rename it model_1e.pth, the name training gives it, and write "
                         f"'model_1e.pth' into last_checkpoint")
    (alone / "model_3e.pth").rename(alone / "model_1e.pth")
    (alone / "last_checkpoint").write_text("model_1e.pth")
    proc = train(synthetic_root, alone, "SOLVER.MAX_EPOCH", "2", "--skip-test")
    assert proc.returncode == 0, console(proc)[-3000:]
    assert f"resuming from {alone / 'model_1e.pth'}" in console(proc) and (alone / "model_final.pth").is_file()


@pytest.mark.slow
def test_a_checkpoint_of_another_model_is_named_as_such_and_a_refused_start_leaves_no_folder(
        finished, mmn_checkpoint, synthetic_root, tmp_path):
    run = copied_run(finished, tmp_path)
    shutil.copyfile(mmn_checkpoint, run / "model_3e.pth")
    (run / "last_checkpoint").write_text("model_3e.pth")
    before = checkpoint_files(run)
    named = (f"{run / 'last_checkpoint'} names model_3e.pth, a checkpoint of another model: it was trained as MMN, "
             f"and this run's model is TAN. A run folder holds the checkpoints of one run: move model_3e.pth out of "
             f"{run}, then write 'model_final.pth', this run's latest checkpoint, into last_checkpoint")
    assert one_error(train(synthetic_root, run, "SOLVER.MAX_EPOCH", "2", "--skip-test")).endswith(named)
    assert one_error(run_main("test_net", "--config-file", SYNTHETIC_CONFIG, "DATASETS.ROOT", synthetic_root,
                              "OUTPUT_DIR", run, "MODEL.DEVICE", "cpu")).endswith(named)
    (run / "last_checkpoint").write_text("model_final.pth")
    line = one_error(train(synthetic_root, run, "SOLVER.MAX_EPOCH", "2", "--skip-test"))
    assert line.endswith(f"model_3e.pth is a checkpoint of another model (MMN, where this run's model is TAN); "
                         f"resuming from model_final.pth (saved after epoch 2) would write over it when training "
                         f"reaches that point. A run folder holds the checkpoints of one run: move model_3e.pth out "
                         f"of {run}")
    assert checkpoint_files(run) == before

    # given by hand, it is named as another model's too; refused once the log has begun, in a new OUTPUT_DIR,
    # the run leaves no folder behind (the console says why)
    foreign = (f"checkpoint '{mmn_checkpoint}' is a checkpoint of another model: MMN (the MODEL.ARCHITECTURE it was "
               f"trained with), where this config's model is TAN; give a checkpoint of TAN, or a config whose "
               f"MODEL.ARCHITECTURE is MMN")
    new = tmp_path / "new"
    proc = train(synthetic_root, new, "SOLVER.MAX_EPOCH", "1", "MODEL.WEIGHT", mmn_checkpoint)
    assert one_error(proc).endswith(foreign) and "running with config" in console(proc)
    assert not new.exists()
    proc = run_main("test_net", "--config-file", SYNTHETIC_CONFIG, "--ckpt", mmn_checkpoint, "DATASETS.ROOT",
                    synthetic_root, "OUTPUT_DIR", new, "MODEL.DEVICE", "cpu")
    assert one_error(proc).endswith(foreign) and not new.exists()
    new.mkdir()  # a folder the user made stays; the log the run started goes
    proc = run_main("test_net", "--config-file", SYNTHETIC_CONFIG, "--ckpt", mmn_checkpoint, "DATASETS.ROOT",
                    synthetic_root, "OUTPUT_DIR", new, "MODEL.DEVICE", "cpu")
    assert one_error(proc).endswith(foreign) and os.listdir(new) == []


def truncate(path):
    path.write_bytes(path.read_bytes()[:1000])


@pytest.mark.slow
def test_a_fallback_names_each_checkpoint_it_passes_over_in_the_log(finished, synthetic_root, tmp_path):
    run = copied_run(finished, tmp_path)
    truncate(run / "model_final.pth")
    truncate(run / "model_2e.pth")
    proc = train(synthetic_root, run, "SOLVER.MAX_EPOCH", "2", "--skip-test")
    assert proc.returncode == 0, console(proc)[-3000:]
    damaged = "cannot be read: it is truncated or damaged (RuntimeError: PytorchStreamReader failed reading zip " \
              "archive: failed finding central directory)"
    [warning] = [line for line in console(proc).splitlines() if "falling back" in line]
    assert warning.endswith(f"checkpoint '{run / 'model_final.pth'}' {damaged}; checkpoint '{run / 'model_2e.pth'}' "
                            f"{damaged}; falling back to the latest readable checkpoint in training order, "
                            f"{run / 'model_1e.pth'}")
    assert warning.split("WARNING: ")[1] in (run / "log.txt").read_text()
    # resuming from what last_checkpoint names: the later files it writes over are named too
    truncate(run / "model_final.pth")
    truncate(run / "model_2e.pth")
    (run / "last_checkpoint").write_text("model_1e.pth")
    proc = train(synthetic_root, run, "SOLVER.MAX_EPOCH", "2", "--skip-test")
    assert proc.returncode == 0, console(proc)[-3000:]
    [warning] = [line for line in console(proc).splitlines() if "writes over it" in line]
    assert warning.endswith(f"checkpoint '{run / 'model_final.pth'}' {damaged}: resuming from model_1e.pth writes "
                            f"over it; checkpoint '{run / 'model_2e.pth'}' {damaged}: resuming from model_1e.pth "
                            f"writes over it")
    assert warning.split("WARNING: ")[1] in (run / "log.txt").read_text()


@pytest.mark.parametrize("seeds, shown", [
    (["-1", "2"], "-1"), (["2", "-1"], "-1"), (["1.5"], "1.5"), (["-0.5", "3"], "-0.5"),
])
def test_seeds_are_whole_numbers_of_0_or_more_said_in_one_line(tmp_path, seeds, shown):
    out = tmp_path / "seeds"
    line = one_error(run_main("train_net", "--config-file", SYNTHETIC_CONFIG, "--seeds", *seeds, "OUTPUT_DIR", out,
                              "MODEL.DEVICE", "cpu"))
    assert line == f"error: --seeds {shown}: seeds are whole numbers of 0 or more (each trains in OUTPUT_DIR/seed_N)"
    assert not out.exists()
    line = one_error(run_main("train_net", "--config-file", SYNTHETIC_CONFIG, "--seeds", "1", str(2 ** 31),
                              "OUTPUT_DIR", out))
    assert line == f"error: --seeds {2 ** 31}: seeds are whole numbers of 0 to 2147483647, the values config SEED takes"


@pytest.mark.parametrize("extra", [[], ["--long"], ["--long-video", "20"]])
def test_a_negative_synthetic_video_seed_is_refused_in_one_line(tmp_path, extra):
    out = tmp_path / "videos"
    line = one_error(run_main("synthetic_videos", "--output", out, "--seed", "-4", *extra))
    assert line == "error: --seed -4: expected a number of 0 or more"
    assert not out.exists()


def test_a_synthetic_moment_lasts_at_least_a_frame(tmp_path):
    out = tmp_path / "videos"
    for seconds in ("0.001", "0.05", "nan"):
        line = one_error(run_main("synthetic_videos", "--output", out, "--long-video", "20", "--moment-seconds",
                                  seconds))
        assert line == (f"error: --moment-seconds {float(seconds):g}: a moment lasts at least a frame; give 0.1 or "
                        f"more (the videos have 10 frames per second)")
    line = one_error(run_main("synthetic_videos", "--output", out, "--moment-seconds", "3"))
    assert line == ("error: --moment-seconds goes with --long-video (the datasets' moments have lengths of their "
                    "own)")
    assert not out.exists()
    proc = run_main("synthetic_videos", "--output", out, "--long-video", "2", "--moment-seconds", "0.1")
    assert proc.returncode == 0, console(proc)[-3000:]
    start, end = json.loads(proc.stdout.strip().splitlines()[-1])["moment"]
    assert end - start == pytest.approx(0.1)


def test_a_tiny_backbone_seed_torch_cannot_take_is_refused_in_one_line(tmp_path):
    out = tmp_path / "tiny"
    line = one_error(run_main("extract_features", "--write-tiny", out, "--backbone", "clip", "--seed",
                              str(2 ** 64)))
    assert line.endswith(f"--seed {2 ** 64}: expected a whole number of 0 to {2 ** 64 - 1}")
    assert not out.exists()


# ---------------------------------------------------------------- a trainer and hooks of the user's own

class OptimizerOfItsOwn(Trainer):
    """build_optimizer over a tensor of its own, not the model's: it would train nothing."""

    def build_optimizer(self, model):
        return torch.optim.SGD([torch.nn.Parameter(torch.zeros(3))], lr=0.1)


class OptimizerLeavingOneOut(Trainer):
    """build_optimizer over the model's parameters but its first."""

    def build_optimizer(self, model):
        first = next(model.parameters())
        return torch.optim.SGD([p for p in model.parameters() if p is not first], lr=0.01)


class StateWithALambda(HookBase):
    def state_dict(self):
        return {"count": 1, "fn": lambda x: x}


class StateAsAList(HookBase):
    def state_dict(self):
        return [1, 2]


class StateThatRaises(HookBase):
    def state_dict(self):
        return {"seen": self.missing}  # an attribute it never set


class StateWithAGeneratorLater(HookBase):
    """Its state gains a generator after epoch 2: the save of epoch 3 cannot write it."""

    def __init__(self):
        self.epochs = 0

    def after_epoch(self, state, epoch):
        self.epochs = epoch

    def state_dict(self):
        return {"epochs": self.epochs, **({"pending": (i for i in range(3))} if self.epochs >= 2 else {})}


def _trainer_with_hook(hook_class):
    class WithHook(Trainer):
        def build_hooks(self):
            hooks = super().build_hooks()
            hooks.insert(-1, hook_class())
            return hooks
    return WithHook


USER_TRAINERS = {"OPTIMIZER_OF_ITS_OWN": OptimizerOfItsOwn, "OPTIMIZER_LEAVING_ONE_OUT": OptimizerLeavingOneOut,
                 **{f"HOOK_{hook.__name__.upper()}": _trainer_with_hook(hook)
                    for hook in (StateWithALambda, StateAsAList, StateThatRaises, StateWithAGeneratorLater)}}
for _name, _trainer in USER_TRAINERS.items():
    if _name not in TRAINERS:
        register_trainer(_name)(_trainer)


def _trainable(config=SYNTHETIC_CONFIG):
    """The names of the trainable parameters of the config's model."""
    from tan.config import load_config
    from tan.modeling import build_model
    return [n for n, p in build_model(load_config(config)).named_parameters() if p.requires_grad]


@pytest.mark.slow
def test_an_optimizer_over_none_of_the_model_s_parameters_is_refused_and_one_leaving_some_out_names_them(
        synthetic_root, tmp_path):
    out = tmp_path / "out"
    trainable = _trainable()
    line = one_error(train(synthetic_root, out, "TRAINER", "OPTIMIZER_OF_ITS_OWN", "SOLVER.MAX_EPOCH", "1"))
    assert line.endswith(f"OptimizerOfItsOwn.build_optimizer() returned an optimizer that holds none of the model's "
                         f"{len(trainable)} trainable parameters ({', '.join(trainable[:8])} (+{len(trainable) - 8} "
                         f"more)) but 1 tensor of its own; training would change nothing. Build it over the model it "
                         f"is given (model.parameters() or its parameter groups; docs/training.md, 'A trainer of your "
                         f"own')")
    assert not out.exists()  # refused before a step: nothing left behind
    proc = train(synthetic_root, out, "TRAINER", "OPTIMIZER_LEAVING_ONE_OUT", "SOLVER.MAX_EPOCH", "1", "--skip-test")
    assert proc.returncode == 0, console(proc)[-3000:]
    assert (f"OptimizerLeavingOneOut.build_optimizer() leaves 1 of the model's {len(trainable)} trainable parameters "
            f"out, which will not be trained: {trainable[0]}") in console(proc)


@pytest.mark.slow
@pytest.mark.parametrize("hook,where,what", [
    ("StateWithALambda", "state_dict()['fn']", "a builtins.function ("),
    ("StateAsAList", None, None),
    ("StateThatRaises", "raised", "AttributeError: 'StateThatRaises' object has no attribute 'missing'"),
])
def test_a_hook_state_no_checkpoint_can_hold_is_refused_at_the_start_naming_the_hook(synthetic_root, tmp_path, hook,
                                                                                     where, what):
    out = tmp_path / "out"
    line = one_error(train(synthetic_root, out, "TRAINER", f"HOOK_{hook.upper()}", "SOLVER.MAX_EPOCH", "1"))
    assert f"hook {hook} (test_hostile_probes.{hook}): state_dict() " in line
    if where == "raised":
        assert line.endswith(f"state_dict() raised {what} (docs/training.md, 'Hooks')")
    elif where:
        assert f"holds a value a checkpoint cannot save: {where} is {what}" in line
        assert line.endswith("keep plain values in it (numbers, strings, lists, dicts, tensors) (docs/training.md, "
                             "'Hooks')")
    else:
        assert line.endswith("state_dict() returned a builtins.list; it must return a dict ({} for nothing to carry), "
                             "which load_state_dict() gets back when the run resumes (docs/training.md, 'Hooks')")
    assert not out.exists()


@pytest.mark.slow
def test_a_hook_state_that_turns_unsavable_stops_the_run_at_that_save_keeping_the_last_checkpoint(synthetic_root,
                                                                                                  tmp_path):
    out = tmp_path / "out"
    line = one_error(train(synthetic_root, out, "TRAINER", "HOOK_STATEWITHAGENERATORLATER", "SOLVER.MAX_EPOCH", "3",
                           "SOLVER.CHECKPOINT_PERIOD", "1", "--skip-test"))
    assert ("hook StateWithAGeneratorLater (test_hostile_probes.StateWithAGeneratorLater): state_dict() holds a "
            "value a checkpoint cannot save: state_dict()['pending'] is a builtins.generator (TypeError: ") in line
    assert line.endswith("; keep plain values in it (numbers, strings, lists, dicts, tensors) (docs/training.md, "
                         "'Hooks')")
    assert (out / "last_checkpoint").read_text() == "model_2e.pth"
    assert torch.load(out / "model_2e.pth", weights_only=False)["hooks"]["StateWithAGeneratorLater"] == {"epochs": 1}
    assert not (out / "model_3e.pth").exists() and not [n for n in os.listdir(out) if n.endswith(".tmp")]


def test_the_help_of_tan_extract_features_says_that_workers_go_without_preset(capsys):
    proc = run_main("extract_features", "--help")
    assert proc.returncode == 0
    help_text = " ".join(proc.stdout.split())
    assert ("--workers WORKERS decoding processes (default 0: in this one); not with --preset, which decodes each "
            "video once in this process") in help_text
    line = one_error(run_main("extract_features", "--preset", "qvhighlights", "--workers", "2", "--videos", "x"))
    assert line.endswith("--workers: not with --preset, which decodes each video once in this process")
