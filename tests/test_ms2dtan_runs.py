"""MS-2D-TAN through tan's machinery, on the built-in synthetic dataset: it
trains and clearly beats its untrained model, the checkpoint alone tests
again, it predicts (tool and API) and draws its start x duration map,
resumes bit for bit after a kill, trains with two processes and under
mixed precision, the data checker reads its config, its training windows
do not depend on the loader's workers, features come from a folder as
from HDF5, and a wrong seconds-per-row is refused."""
import json
import os
import subprocess
import sys

import h5py
import numpy as np
import pytest
import torch

from conftest import ONE_THREAD, REPO, run_main, run_tool, with_overrides
from runs import final_weights, result_metrics as metrics, stop_process_group, wait_for_training_record

pytestmark = pytest.mark.slow

CONFIG = os.path.join(REPO, "configs", "ms2dtan_synthetic.yaml")
SHORT = ["MODEL.DEVICE", "cpu", "SOLVER.LOG_PERIOD", "4", "SOLVER.TEST_PERIOD", "0", "SOLVER.MAX_EPOCH", "3",
         "SOLVER.ITERS_PER_EPOCH", "20", "SOLVER.MILESTONES", "(3,)", "SOLVER.LR", "0.005"]


def train_args(root, out, *extra):
    return ["--config-file", CONFIG, *with_overrides(["DATASETS.ROOT", root, "OUTPUT_DIR", str(out), *SHORT], *extra)]


@pytest.fixture(scope="module")
def trained(synthetic_root, tmp_path_factory):
    """Three short epochs of MS_TAN (60 iterations, about 20 s), then the test of the final model."""
    out = tmp_path_factory.mktemp("ms2dtan") / "out"
    proc = run_main("train_net", *train_args(synthetic_root, out), env=ONE_THREAD, cwd=str(out.parent))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return out


def test_it_trains_beats_its_untrained_model_and_its_checkpoint_tests_alone(trained, synthetic_root, tmp_path):
    assert "ARCHITECTURE: MS_TAN" in (trained / "config.yml").read_text()
    final = metrics(trained / "inference" / "model_final")
    proc = run_main("test_net", "--config-file", CONFIG, "DATASETS.ROOT", synthetic_root, "OUTPUT_DIR",
                    str(tmp_path / "untrained"), *SHORT, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    untrained = metrics(tmp_path / "untrained" / "inference" / "untrained")
    assert final["R@1,IoU@0.5"] > untrained["R@1,IoU@0.5"] + 8, (final, untrained)  # 26.9 against 14.0 here
    proc = run_main("test_net", "--ckpt", str(trained / "model_final.pth"), "DATASETS.ROOT", synthetic_root,
                    "OUTPUT_DIR", str(tmp_path / "again"), cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    again = metrics(tmp_path / "again" / "inference" / "model_final")
    assert {k: v for k, v in again.items() if k != "checkpoint"} == {k: v for k, v in final.items()
                                                                     if k != "checkpoint"}


def test_it_predicts_with_the_tool_and_the_api_and_draws_its_map(trained, synthetic_root, tmp_path):
    with open(os.path.join(synthetic_root, "synthetic", "annotations", "test.json")) as f:
        annotations = json.load(f)
    video = sorted(annotations)[0]
    sentence = annotations[video]["sentences"][0]
    proc = run_main("predict", "--ckpt", str(trained / "model_final.pth"), "--video", video, "--query", sentence,
                    "--topk", "3", "--json", "DATASETS.ROOT", synthetic_root, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    moments = json.loads(proc.stdout)["queries"][0]["moments"]
    duration = annotations[video]["duration"]
    assert len(moments) == 3 and all(0 <= m["start"] < m["end"] <= duration + 2 for m in moments)

    from tan.api import load_model
    model = load_model(str(trained / "model_final.pth"), overrides=["DATASETS.ROOT", synthetic_root])
    with h5py.File(os.path.join(synthetic_root, "synthetic", "features", "synthetic_features.hdf5"), "r") as f:
        feats = f[video][:]
    encoded = model.encode_video(feats, duration)
    [api_moments] = model.ground(encoded, [sentence], topk=3)
    assert [(round(m.start, 3), round(m.end, 3)) for m in api_moments] == \
        [(round(m["start"], 3), round(m["end"], 3)) for m in moments]
    [score_map] = model.score_maps(encoded, [sentence])
    rows = max(len(feats), 128) // 4  # clips of 4 rows over the whole video (a short one padded to the window)
    assert score_map.shape == (rows, rows)

    pytest.importorskip("matplotlib")
    proc = run_main("visualize", "scores", "--ckpt", str(trained / "model_final.pth"), "--index", "0", "--out",
                    str(tmp_path / "pics"), "DATASETS.ROOT", synthetic_root, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(os.listdir(tmp_path / "pics")) == 1


def test_it_resumes_bit_for_bit_after_a_kill(trained, synthetic_root, tmp_path):
    """SIGKILL in epoch 2, then a restart: the training windows drawn again are the same."""
    out = tmp_path / "killed"
    env = dict(os.environ, PYTHONUNBUFFERED="1", **ONE_THREAD)
    with open(tmp_path / "console.txt", "w") as console:
        proc = subprocess.Popen([sys.executable, os.path.join(REPO, "tools", "train_net.py"),
                                 *train_args(synthetic_root, out), "--skip-test"], env=env, stdout=console,
                                stderr=subprocess.STDOUT, cwd=str(tmp_path), start_new_session=True)
    try:
        wait_for_training_record(out, proc, 2, 4)
    finally:
        stop_process_group(proc)
    proc = run_tool("train_net", *train_args(synthetic_root, out), "--skip-test", env=ONE_THREAD, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "resuming" in proc.stdout + proc.stderr
    want, got = final_weights(trained), final_weights(out)
    assert want.keys() == got.keys()
    for name in want:
        assert torch.equal(want[name], got[name]), name


def test_it_trains_with_two_processes_and_under_mixed_precision(synthetic_root, tmp_path):
    out = tmp_path / "ddp"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           os.path.join(REPO, "tools", "train_net.py"),
           *train_args(synthetic_root, out, "SOLVER.MAX_EPOCH", "1", "SOLVER.ITERS_PER_EPOCH", "4")]
    proc = subprocess.run(cmd, env=dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1"), cwd=str(tmp_path),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "using 2 process(es)" in (out / "log.txt").read_text()
    assert metrics(out / "inference" / "model_final")["R@1,IoU@0.5"] >= 0
    proc = run_main("train_net", *train_args(synthetic_root, tmp_path / "bf16", "SOLVER.AMP", "bf16",
                                             "SOLVER.MAX_EPOCH", "1", "SOLVER.ITERS_PER_EPOCH", "3"), "--skip-test")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "bf16" / "model_final.pth").is_file()


def test_the_data_checker_reads_its_config_and_a_wrong_time_unit_is_refused(synthetic_root, tmp_path):
    proc = run_main("check_data", "--config-file", CONFIG, "DATASETS.ROOT", synthetic_root)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "synthetic_train" in proc.stdout
    proc = run_main("train_net", *train_args(synthetic_root, tmp_path / "wrong", "MODEL.MS_TAN.TIME_UNIT", "1.0"))
    assert proc.returncode == 2
    output = proc.stdout + proc.stderr
    assert "0.5 s per feature row" in output and "MODEL.MS_TAN.TIME_UNIT is 1 s" in output


def short_config(synthetic_root, *extra):
    from tan.config import load_config
    return load_config(CONFIG, ["DATASETS.ROOT", synthetic_root, *SHORT, *extra])


def test_training_windows_do_not_depend_on_the_loaders_workers(synthetic_root):
    from tan.data import RunData
    batches = {}
    for workers in (0, 2):
        data = RunData(short_config(synthetic_root, "DATALOADER.NUM_WORKERS", str(workers)))
        loader = data.train_loader(False)
        loader.sampler.set_epoch(3)
        batches[workers] = [b for _, b in zip(range(3), loader)]
    for a, b in zip(batches[0], batches[2]):
        assert torch.equal(a["clip_offsets"], b["clip_offsets"]) and torch.equal(a["feats"], b["feats"])
    assert any(int(b["clip_offsets"].max()) > 0 for b in batches[0])  # windows were drawn


def test_features_from_a_folder_give_the_items_of_the_hdf5_file(synthetic_root, tmp_path):
    from tan.data import RunData
    folder = tmp_path / "features"
    folder.mkdir()
    with h5py.File(os.path.join(synthetic_root, "synthetic", "features", "synthetic_features.hdf5"), "r") as f:
        for video in list(f)[:60]:
            np.save(folder / f"{video}.npy", f[video][:])
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(f"folder_test:\n  annotations: {synthetic_root}/synthetic/annotations/test.json\n"
                       f"  features: {folder}\n  format: seconds\n")
    cfg = short_config(synthetic_root, "DATASETS.CATALOG", str(catalog), "DATASETS.TEST", "('folder_test',)")
    from_folder = RunData(cfg).dataset("folder_test")
    from_hdf5 = RunData(short_config(synthetic_root)).dataset("synthetic_test")
    index = {(from_hdf5.videos[v], s): q for q, (v, s) in enumerate(zip(from_hdf5.video_ids, from_hdf5.sentences))}
    for q in range(0, len(from_folder), 7):
        video = from_folder.videos[from_folder.video_ids[q]]
        mine, theirs = from_folder[q], from_hdf5[index[(video, from_folder.sentences[q])]]
        assert torch.equal(mine["feats"], theirs["feats"]) and mine["clip_count"] == theirs["clip_count"]


def test_features_from_two_streams_are_windows_of_their_concatenated_rows(synthetic_root, tmp_path):
    """The synthetic features split into two streams of 64 channels (an HDF5 file and a folder):
    each stream normalised, concatenated, then the model's own normalisation, at the rows' rate."""
    from tan.data import RunData
    from tan.data.features.rows import l2_normalize_rows
    from tan.modeling.ms2dtan.clips import torch_normalized
    folder, rows = tmp_path / "second", {}
    folder.mkdir()
    with h5py.File(os.path.join(synthetic_root, "synthetic", "features", "synthetic_features.hdf5"), "r") as f, \
            h5py.File(tmp_path / "first.hdf5", "w") as first:
        for video in list(f)[:60]:
            rows[video] = f[video][:]
            first[video] = rows[video][:, :64]
            np.save(folder / f"{video}.npy", rows[video][:, 64:])
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(f"streams_test:\n  annotations: {synthetic_root}/synthetic/annotations/test.json\n"
                       f"  features: [{tmp_path / 'first.hdf5'}, {folder}]\n  format: seconds\n")
    cfg = short_config(synthetic_root, "DATASETS.CATALOG", str(catalog), "DATASETS.TEST", "('streams_test',)")
    dataset = RunData(cfg).dataset("streams_test")
    for q in range(0, len(dataset), 11):
        video = dataset.videos[dataset.video_ids[q]]
        joined = np.concatenate([l2_normalize_rows(rows[video][:, :64]), l2_normalize_rows(rows[video][:, 64:])], 1)
        item = dataset[q]
        assert item["clip_count"] == len(joined) and item["feats"].shape[1] == 128
        assert torch.equal(item["feats"][:len(joined)], torch.from_numpy(torch_normalized(joined)))
        window = dataset[(q, 1)]  # a training item: a window of NUM_CLIPS rows from its drawn start
        start = window["clip_offset"]
        if len(joined) > 128:
            assert torch.equal(window["feats"], torch.from_numpy(torch_normalized(joined))[start:start + 128])
