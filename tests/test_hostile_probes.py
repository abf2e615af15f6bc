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

    # A start that fails once the run folder is prepared (a bad line in the word-vector file) leaves the
    # log of what happened and no config.yml that would claim the folder holds a run.
    with open(root / "synthetic" / "word_vectors.txt", "a") as f:
        f.write("broken line\n")
    failed = tmp_path / "failed"
    line = one_error(train(str(root), failed, "SOLVER.MAX_EPOCH", "1"))
    assert "word_vectors.txt:" in line and "expected a word and 300 numbers" in line
    assert sorted(os.listdir(failed)) == ["log.txt"]


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
    before = {n: (run / n).read_bytes() for n in os.listdir(run) if n.endswith(".pth")}
    line = one_error(train(synthetic_root, run, "SOLVER.MAX_EPOCH", "2", "--skip-test"))
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
