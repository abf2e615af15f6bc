"""tools/seed_comparison: the figures docs/results.md takes from each reference's log, the data
the documented comparison ran on, and the layouts its runners give the references."""
import hashlib
import json
import os
import sys

import h5py
import pytest

from conftest import REPO

sys.path.insert(0, os.path.join(REPO, "tools", "seed_comparison"))
import compare  # noqa: E402
import make_dataset  # noqa: E402
import step_losses  # noqa: E402
import videox_cpu  # noqa: E402

# The last test table each reference prints, as its own code writes it (from runs of the three).
CHENJOYA_LOG = """2026-12-03 11:34:07,355 tan.inference INFO: Performing TACoSDataset evaluation (Size: 700).
+-----------------+-----------------+-----------------+-----------------+-----------------+-----------------+-----------------+-----------------+
| Rank@1,mIoU@0.1 | Rank@1,mIoU@0.3 | Rank@1,mIoU@0.5 | Rank@1,mIoU@0.7 | Rank@5,mIoU@0.1 | Rank@5,mIoU@0.3 | Rank@5,mIoU@0.5 | Rank@5,mIoU@0.7 |
+-----------------+-----------------+-----------------+-----------------+-----------------+-----------------+-----------------+-----------------+
|      67.57      |      52.43      |      43.86      |      23.00      |      98.00      |      79.86      |      73.29      |      44.00      |
+-----------------+-----------------+-----------------+-----------------+-----------------+-----------------+-----------------+-----------------+
"""
MMN_LOG = """2026-12-03 11:56:19,037 mmn.inference INFO: 
+-------------+-------------+-------------+-------------+-------------+-------------+
| R@1,IoU@0.1 | R@1,IoU@0.3 | R@1,IoU@0.5 | R@5,IoU@0.1 | R@5,IoU@0.3 | R@5,IoU@0.5 |
+-------------+-------------+-------------+-------------+-------------+-------------+
|    58.26    |    56.81    |    55.94    |    93.48    |    89.71    |    85.51    |
+-------------+-------------+-------------+-------------+-------------+-------------+
"""
VIDEOX_EPOCH = """epoch: {epoch} train loss 0.2689 test loss 0.2600
+performance on training set--------+--------+--------+--------+--------+-------+
| R1@0.1 | R1@0.3 | R1@0.5 | R1@0.7 | R5@0.1 | R5@0.3 | R5@0.5 | R5@0.7 | mIoU  |
+--------+--------+--------+--------+--------+--------+--------+--------+-------+
| 35.92  | 21.09  | 13.01  |  4.73  | 59.40  | 43.19  | 28.86  | 10.21  | 15.24 |
+--------+--------+--------+--------+--------+--------+--------+--------+-------+
+performance on testing set+--------+--------+--------+--------+--------+------+
| R1@0.1 | R1@0.3 | R1@0.5 | R1@0.7 | R5@0.1 | R5@0.3 | R5@0.5 | R5@0.7 | mIoU |
+--------+--------+--------+--------+--------+--------+--------+--------+------+
| 11.59  |  2.90  |  {r1}  |  0.00  | 76.38  | 48.70  | 30.14  | 12.32  | 3.19 |
+--------+--------+--------+--------+--------+--------+--------+--------+------+
"""
# The documented comparison's data (make_dataset.py's defaults): what its files hold. They come from
# NumPy's default Generator (normal, integers, choice): a NumPy release that changed those streams
# would change them, and docs/results.md's comparison would then need its data regenerated.
DOCUMENTED = {"tacos/annotations/train.json": "e82f29d9d91918de70de78be798074489321d4d95f0e9398b68159c7a8115456",
              "tacos/annotations/val.json": "3d929401137df10d0c9f432c69514391480eefa70ad6cf93b6ab98e53f4fb5e9",
              "tacos/annotations/test.json": "a0be8df1c45560ed758679df24a82151f26e4d121e44ff7965920d7320567868",
              "glove/glove.840B.300d.txt": "e581994941f210acac20e084d86401628b83a9119546138a051baa4eddb1fdd0"}


@pytest.mark.parametrize("model, log, text, expected", [
    ("2dtan", "log.txt", CHENJOYA_LOG, 43.86),
    ("mmn", "log.txt", MMN_LOG, 55.94),
    ("ms2dtan", "log/tacos/ms2dtan_reference/ms2dtan_reference_train.log",
     VIDEOX_EPOCH.format(epoch=0, r1=" 1.45") + VIDEOX_EPOCH.format(epoch=1, r1="17.25"), 17.25),
])
def test_the_reference_figure_is_r1_at_iou_05_of_its_last_test_table(tmp_path, model, log, text, expected):
    path = tmp_path / log
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("2026-12-03 11:33:00 its training log, then\n" + text)
    spec = compare.MODELS[model]
    if spec.get("finished"):  # a reference that prints a table every epoch has finished only once it says so
        assert compare.reference_result(str(tmp_path), spec["log"], spec["finished"]) is None
        (tmp_path / spec["finished"]).touch()
    assert compare.reference_result(str(tmp_path), spec["log"], spec.get("finished")) == expected
    if model == "ms2dtan":
        assert spec["finished"] == videox_cpu.FINISHED  # the file its runner writes


def test_a_reference_run_without_its_table_has_no_figure(tmp_path):
    (tmp_path / "log.txt").write_text("2026-12-03 11:33:00 tan.trainer INFO: eta: 0:01:13  epoch: 7/8\n")
    assert compare.reference_result(str(tmp_path)) is None
    assert compare.reference_result(str(tmp_path / "missing")) is None


def test_the_column_is_found_by_its_header_whatever_the_ious(tmp_path):
    # MMN on Charades-STA prints IoU 0.5 and 0.7 only: R@1 IoU 0.5 is the first column there
    (tmp_path / "log.txt").write_text("| R@1,IoU@0.5 | R@1,IoU@0.7 | R@5,IoU@0.5 | R@5,IoU@0.7 |\n"
                                      "+-------------+\n|    41.20    |    22.10    |    80.00    |    50.00    |\n")
    assert compare.reference_result(str(tmp_path)) == 41.20


def test_step_losses_refuses_a_tan_run_that_did_not_log_every_step(tmp_path):
    (tmp_path / "ref").mkdir()
    (tmp_path / "tan").mkdir()
    terms = {"loss_iou": 0.5, "loss_vid": 0.6, "loss_sent": 0.8}
    (tmp_path / "ref" / "losses.json").write_text(json.dumps([dict(epoch=1, **terms)] * 4))
    (tmp_path / "tan" / "metrics.jsonl").write_text("".join(json.dumps(dict(iteration=i, **terms)) + "\n"
                                                            for i in (2, 4)))
    with pytest.raises(SystemExit, match="metrics.jsonl"):
        step_losses.step_losses(str(tmp_path / "ref"), str(tmp_path / "tan"))
    (tmp_path / "tan" / "metrics.jsonl").write_text("".join(json.dumps(dict(iteration=i, **terms)) + "\n"
                                                            for i in (1, 2)))
    assert [step for step, _, _ in step_losses.step_losses(str(tmp_path / "ref"), str(tmp_path / "tan"))] == [1, 2]


def test_the_default_dataset_is_the_documented_one_and_options_change_only_theirs(tmp_path):
    make_dataset.write(str(tmp_path / "documented"), 7)
    for name, digest in DOCUMENTED.items():
        assert hashlib.sha256((tmp_path / "documented" / name).read_bytes()).hexdigest() == digest, name
    make_dataset.write(str(tmp_path / "small"), 7, train_videos=32)
    for split, videos in (("train", 32), ("val", 8), ("test", 24)):
        assert len(json.loads((tmp_path / "small" / "tacos" / "annotations" / f"{split}.json").read_text())) == videos


def test_one_phrasing_per_test_moment_makes_the_test_split_a_figure_over_its_moments(tmp_path):
    """--test-videos / --test-phrasings change the test split only: the training data stay the
    documented ones, and every test moment is asked once, so queries and moments are as many."""
    make_dataset.write(str(tmp_path / "fine"), 7, test_videos=40, test_phrasings=1)
    make_dataset.write(str(tmp_path / "documented"), 7)
    annotations = tmp_path / "fine" / "tacos" / "annotations"
    assert (annotations / "train.json").read_bytes() == (
        tmp_path / "documented" / "tacos" / "annotations" / "train.json").read_bytes()
    test = json.loads((annotations / "test.json").read_text())
    assert len(test) == 40
    queries, moments = compare.test_moments(str(tmp_path / "fine"))
    assert queries == moments == sum(len(a["sentences"]) for a in test.values())
    # the documented test split asks each of its moments ten times
    queries, moments = compare.test_moments(str(tmp_path / "documented"))
    assert queries == 10 * moments


@pytest.mark.parametrize("model", sorted(compare.MODELS))
def test_tans_side_evaluates_whole_as_the_references_do(model):
    """The references score every test video whole: tan's side must not ground its longer test
    videos by windows, which would score the same weights another way (on dataset A, one run's 50.00 whole
    was 52.61 by windows)."""
    from tan.config import load_config
    cfg = load_config(os.path.join(REPO, "tools", "seed_comparison", compare.MODELS[model]["config"]))
    assert cfg.TEST.WINDOW.IN_EVALUATION is False


def test_the_comparisons_criteria_by_hand():
    c = compare.summary([70.0, 72.0, 74.0], [69.0, 71.0, 67.0])
    assert c["gap"] == pytest.approx(3.0)  # 72 - 69
    assert c["welch_t"] == pytest.approx(3.0 / ((4 / 3 + 4 / 3) ** 0.5))  # both variances 4
    assert c["sd_ratio"] == pytest.approx(1.0)
    assert c["lowest_below"] == pytest.approx(5.0)  # 72 - 67


def test_videox_layout_is_what_its_tacos_reader_and_tans_ms2dtan_datasets_read(tmp_path):
    make_dataset.write(str(tmp_path), 7)
    root = videox_cpu.lay_out(str(tmp_path))
    assert root == os.path.join(str(tmp_path), "videox")
    folder = os.path.join(root, "TACoS")
    with h5py.File(tmp_path / "tacos" / "features" / "tall_c3d_features.hdf5", "r") as ours, \
            h5py.File(os.path.join(folder, "tacos_c3d_fc6_nonoverlap.hdf5"), "r") as its:
        assert sorted(its) == sorted(os.path.splitext(name)[0] for name in ours)  # "strain-d00.avi" -> "strain-d00"
        assert (its["strain-d00"][:] == ours["strain-d00.avi"][:]).all()
    for split in ("train", "val", "test"):
        assert json.load(open(os.path.join(folder, f"{split}.json"))) == json.loads(
            (tmp_path / "tacos" / "annotations" / f"{split}.json").read_text())
    vectors = os.path.join(folder, ".vector_cache", "glove.6B.300d.txt")
    assert open(vectors).read() == (tmp_path / "glove" / "glove.840B.300d.txt").read_text()
    assert videox_cpu.lay_out(str(tmp_path)) == root  # kept once written


@pytest.mark.parametrize("runner, expected", [("mmn_cpu.py", "a checkout of MCG-NJU/MMN"),
                                              ("videox_cpu.py", "a checkout of microsoft/VideoX")])
def test_a_runner_refuses_a_wrong_checkout_before_writing_anything(tmp_path, runner, expected):
    import subprocess
    data = tmp_path / "data"
    proc = subprocess.run([sys.executable, os.path.join(REPO, "tools", "seed_comparison", runner), "--reference",
                           str(tmp_path), "--data", str(data), "--seed", "1", "--out", str(tmp_path / "run")],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and expected in proc.stderr and str(tmp_path) in proc.stderr
    assert not data.exists() and not (tmp_path / "run").exists()
