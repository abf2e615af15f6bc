"""What a hostile but realistic user tries, run as that user runs it (the tools
as commands): a one-line message naming the file or key and what to do, a
truthful exit code, and a folder that says what it holds."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest
import torch

from conftest import REPO, SYNTHETIC_CONFIG, run_tool

pytestmark = pytest.mark.slow

QUICK = ["MODEL.DEVICE", "cpu", "DATALOADER.NUM_WORKERS", "0", "SOLVER.LOG_PERIOD", "2", "SOLVER.TEST_PERIOD", "0",
         "SOLVER.ITERS_PER_EPOCH", "3", "SOLVER.MILESTONES", "(5,)"]


def train(root, out, *extra, config=SYNTHETIC_CONFIG):
    return run_tool("train_net", "--config-file", config, "DATASETS.ROOT", root, "OUTPUT_DIR", str(out), *QUICK,
                    *extra)


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
    line = one_error(train(synthetic_root, out, config=str(config)))
    assert line.endswith(f"config file '{config}', line {second}: key 'SOLVER' is given a second time (first at "
                         f"line {first}); plain YAML would keep the last one and drop the first without a word; "
                         f"merge them into one")
    assert not out.exists()
    within = tmp_path / "within.yaml"
    within.write_text("SOLVER:\n  LR: 0.001\n  LR: 0.9\n")
    line = one_error(run_tool("check_data", "--config-file", str(within), "DATASETS.ROOT", synthetic_root))
    assert "within.yaml', line 3: key 'LR' is given a second time (first at line 2)" in line


def test_config_and_catalog_files_that_are_not_utf8_or_not_files(synthetic_root, tmp_path):
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"# caf\xe9 settings\nSOLVER:\n  LR: 0.01\n")
    line = one_error(train(synthetic_root, tmp_path / "out", config=str(latin)))
    assert line.endswith(f"config file '{latin}' is not UTF-8 text (byte 0xe9 on line 1); save it as UTF-8")
    line = one_error(train(synthetic_root, tmp_path / "out", config=str(tmp_path)))
    assert line.endswith(f"config file '{tmp_path}' is a folder; expected a file")
    catalog = tmp_path / "catalog.yaml"
    catalog.write_bytes(b"mine:\n  annotations: \xff.json\n  features: f.hdf5\n")
    line = one_error(run_tool("check_data", "--config-file", SYNTHETIC_CONFIG, "DATASETS.ROOT", synthetic_root,
                              "DATASETS.CATALOG", str(catalog)))
    assert f"dataset catalog file '{catalog}' (DATASETS.CATALOG) is not UTF-8 text (byte 0xff on line 2)" in line
    assert not (tmp_path / "out").exists()


def test_a_negative_learning_rate_is_refused_for_what_it_is(synthetic_root, tmp_path):
    line = one_error(train(synthetic_root, tmp_path / "out", "SOLVER.LR", "-1"))
    assert line.endswith("config key SOLVER.LR: expected a positive learning rate, got -1.0")


# ---------------------------------------------------------------- caches and failed starts

def test_a_truncated_word_vector_cache_is_rebuilt_and_a_failed_start_leaves_no_config(synthetic_root, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(synthetic_root, root)
    shutil.rmtree(root / "cache", ignore_errors=True)  # other tests' vocabularies have theirs there
    proc = run_tool("check_data", "--config-file", SYNTHETIC_CONFIG, "DATASETS.ROOT", str(root))
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
    proc = run_tool("test_net", "--config-file", SYNTHETIC_CONFIG, "DATASETS.ROOT", synthetic_root, "OUTPUT_DIR",
                    str(finished), "MODEL.DEVICE", "cpu")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"evaluating {final}" in console(proc)


def test_one_unreadable_checkpoint_of_several_stops_or_with_keep_going_is_left_out(finished, synthetic_root,
                                                                                    tmp_path):
    text = finished / "notes.pth"
    text.write_text("12 epochs, lr 0.01\n")
    ckpts = [str(finished / "model_1e.pth"), str(text), str(finished / "model_2e.pth")]
    common = ["DATASETS.ROOT", synthetic_root, "MODEL.DEVICE", "cpu", "OUTPUT_DIR", str(tmp_path / "eval")]
    line = one_error(run_tool("test_net", "--ckpt", *ckpts, *common))
    assert line.endswith(f"checkpoint '{text}' cannot be read: it is not a file that torch.save wrote; nothing was "
                         f"evaluated (pass --keep-going to evaluate the others)")
    assert not (tmp_path / "eval").exists()
    proc = run_tool("test_net", "--ckpt", *ckpts, "--keep-going", *common)
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


# ---------------------------------------------------------------- prediction inputs

def test_prediction_names_the_line_of_an_unknown_video_and_a_text_file_named_npy(finished, tmp_path):
    queries = tmp_path / "queries.jsonl"
    queries.write_text('{"vid": "syn_test_0000", "query": "the person opens the door"}\n'
                       '{"vid": "no_such_video", "query": "the person opens the door"}\n')
    line = one_error(run_tool("predict", "--ckpt", str(finished / "model_final.pth"), "--queries", str(queries)))
    assert f"{queries}:2: video 'no_such_video' is in none of the configured feature files" in line
    fake = tmp_path / "clip.npy"
    fake.write_text("0.1 0.2 0.3\n")
    line = one_error(run_tool("predict", "--ckpt", str(finished / "model_final.pth"), "--features", str(fake),
                              "--duration", "10", "--query", "the person opens the door"))
    assert line.endswith(f"--features: '{fake}' cannot be read: not a .npy file (it does not start with NumPy's "
                         f"header); write it with numpy.save")
    assert "pickle" not in line


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
