"""Ranking a long video's windows (docs/long_videos.md, "Ranking the windows"): the windows a
training query is ranked in, each read and encoded once per batch; the relevance head and the
cross-window losses beside any model; grounding the top TEST.WINDOW.TOP_K windows only; reading a
window's rows alone; and the refusals of bad settings, each in one line naming the key."""
import os
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest
import torch

import tan
from tan.config import load_config
from tan.data.build import RunData
from tan.data.collate import collate_ranked, moment_rows, real_rows
from tan.data.features.clip_inputs import ClipInput, NativeClips, ResampledClips, SampledClips
from tan.data.features.sources import ConcatenatedFeatures, HDF5Features
from tan.data.training_windows import TrainingWindows
from tan.engine.long_videos.relevance_stage import RelevanceStage, final_scores, relevance_stage
from tan.errors import TanError
from tan.modeling import build_model
from tan.modeling.relevance import RelevanceHead
from tan.modeling.tan_msra.clips import AveragedClips
from tan.structures.ranked_windows import RankedDraw

from conftest import ONE_THREAD, REPO, SYNTHETIC_CONFIG, long_catalog, run_main, run_tool

LENGTH = 50.0
LONG = ["DATASETS.TRAIN", '("long_train",)', "DATASETS.VAL", "()", "DATASETS.TEST", '("long_test",)']
RANKED = ["INPUT.TRAIN_WINDOW.LENGTH", str(LENGTH), "INPUT.TRAIN_WINDOW.RANKED_WINDOWS", "3",
          "MODEL.RELEVANCE.ENABLED", "True", "MODEL.RELEVANCE.HIDDEN_SIZE", "32", "MODEL.WINDOW_RANKING.LOSS_WEIGHT",
          "1.0", "TEST.WINDOW.TOP_K", "3"]


@pytest.fixture(scope="module")
def long_root(synthetic_root, tmp_path_factory):
    """(DATASETS.ROOT with the synthetic dataset's word vectors, the catalog of long_train (24 videos of
    3-5 minutes, one query each) and long_test (4 videos of 5 minutes))."""
    catalog, _, test_features = long_catalog(tmp_path_factory.mktemp("ranked"), {"train": 24, "test": 4},
                                             {"train": (180, 300), "test": (300, 300)}, seed=3)
    return synthetic_root, catalog, test_features


def train_args(long_root, out, *extra):
    root, catalog = long_root[:2]
    return ["--config-file", SYNTHETIC_CONFIG, "DATASETS.ROOT", root, "DATASETS.CATALOG", catalog, *LONG,
            "OUTPUT_DIR", str(out), "MODEL.DEVICE", "cpu", "DATALOADER.NUM_WORKERS", "0", "SOLVER.MAX_EPOCH", "2",
            "SOLVER.TEST_PERIOD", "0", "SOLVER.CHECKPOINT_PERIOD", "1", "SEED", "5", *RANKED, *extra]


@pytest.fixture(scope="module")
def ranked_run(long_root, tmp_path_factory):
    out = tmp_path_factory.mktemp("ranked_run")
    proc = run_tool("train_net", *train_args(long_root, out), env=ONE_THREAD)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return str(out), proc.stdout + proc.stderr


def test_a_query_is_ranked_in_a_window_holding_it_its_nearest_neighbours_and_others_of_the_grid():
    windows = TrainingWindows(LENGTH, LENGTH, 0.0, 4)
    drawn = windows.ranked_windows(np.random.default_rng(0), 600.0, 600, (300.0, 310.0))
    assert len(drawn) == 5
    assert drawn[0].start <= 300.0 and 310.0 <= drawn[0].end  # the first holds the moment
    assert drawn[1].end == 300.0 and drawn[2].start == 310.0 + 15.0  # the nearest on the grid sharing no row
    grid = {(s, s + LENGTH) for s in np.arange(0.0, 551.0, 25.0)}
    assert all((w.start, w.end) in grid and w.last - w.first == 50 for w in drawn)
    assert all(w.end <= 300.0 or w.start >= 310.0 for w in drawn[1:])
    again = windows.ranked_windows(np.random.default_rng(0), 600.0, 600, (300.0, 310.0))
    assert again == drawn  # drawn from the generator alone: a resumed run draws the same
    # a moment longer than half a window may fit no window of the grid: nothing to rank
    assert windows.ranked_windows(np.random.default_rng(0), 600.0, 600, (310.0, 351.0)) is None


def _item(video, spans, moments):
    return {"ranked": RankedDraw(feats=torch.arange(len(spans), dtype=torch.float32)[:, None, None].expand(-1, 2, 3)
                                 + video, sources=torch.tensor([[[0, 1], [1, 2]]] * len(spans)),
                                 raw_rows=torch.tensor([2] * len(spans)),
                                 spans=torch.tensor(spans, dtype=torch.float64), video=(0, video),
                                 moments=torch.tensor(moments, dtype=torch.float64))}


def test_a_batch_encodes_each_window_of_a_video_once_and_ranks_each_sentence_in_all_of_them():
    first = _item(7, [[0.0, 50.0], [50.0, 100.0]], [[10.0, 20.0]])
    second = _item(7, [[100.0, 150.0], [50.0, 100.0]], [[120.0, 130.0]])  # shares [50, 100) with the first
    other = _item(8, [[0.0, 50.0]], [[40.0, 60.0]])  # another video; its only window holds part of the moment
    short = {}  # an item of a video taken whole brings no window
    ranked = collate_ranked([first, short, second, other], [1, 1, 1, 1])["ranked"]
    assert ranked.feats.shape == (4, 2, 3)  # [0, 50), [50, 100), [100, 150) of video 7, [0, 50) of 8
    pairs = list(zip(ranked.query.tolist(), ranked.window.tolist(), ranked.labels.tolist(), ranked.order.tolist()))
    assert pairs == [(0, 0, 1.0, 0), (0, 1, 0.0, 1), (0, 2, 0.0, -1),
                     (2, 0, 0.0, -1), (2, 1, 0.0, 1), (2, 2, 1.0, 0)]  # no pair of video 8: part of it
    # the rows of each window (2 of 25 s) that the moment covers where it holds it, else all of them
    assert ranked.rows.tolist() == [[0, 1], [0, 2], [0, 2], [0, 2], [0, 2], [0, 2]]
    assert collate_ranked([short], [1]) == {}
    # a video with its sentences (batches of videos): each of them ranked in the item's windows
    video = _item(9, [[0.0, 50.0], [100.0, 150.0]], [[10.0, 20.0], [110.0, 112.0]])
    ranked = collate_ranked([short, video], [3, 2])["ranked"]
    assert list(zip(ranked.query.tolist(), ranked.labels.tolist())) == [
        (3, 1.0), (3, 0.0), (4, 0.0), (4, 1.0)]  # the batch's sentences 3 and 4, after the first item's three


def test_a_moment_covers_the_rows_it_overlaps_and_at_least_one():
    own = ClipInput(128).row_sources(128)  # 128 rows of 25.6 s, each its own
    assert moment_rows(own, 128, 25.6, 1.0, 4.0) == (5, 20)  # 5 rows a second: [1 s, 4 s)
    assert moment_rows(own, 128, 25.6, 1.0, 1.0) == (5, 6)  # of no length: its row
    assert moment_rows(own, 128, 25.6, 0.0, 25.6) == (0, 128)
    assert moment_rows(own, 128, 25.6, 25.6, 25.6) == (127, 128)  # at the very end: the last row
    # a window without the moment is scored on its real rows: not on the padding of a shorter one
    assert real_rows(own, 128) == (0, 128) and real_rows(NativeClips(32).row_sources(25), 25) == (0, 25)


@pytest.mark.parametrize("clips", [ResampledClips(128), ResampledClips(8), SampledClips(8), AveragedClips(128),
                                   NativeClips(32)], ids=repr)
def test_the_rows_of_a_moment_are_those_the_clip_input_makes_from_its_rows_on_disk(clips):
    # 25 rows of a second on disk, each a one-hot row: what the clip input makes of them says which
    # rows on disk each of its rows comes from, and the moment's rows are those made from its own
    onehot = np.eye(25, dtype=np.float32)
    taken = clips.take(clips.base(onehot))[0]
    for begin, finish in [(10.0, 11.0), (3.2, 9.7), (0.0, 0.0), (24.5, 25.0)]:
        first, last = moment_rows(clips.row_sources(25), 25, 25.0, begin, finish)
        on_disk = set(range(int(begin), max(int(np.ceil(finish)), int(begin) + 1)))
        made_of = [set(np.flatnonzero(row > 0).tolist()) for row in taken]
        expected = [r for r, rows in enumerate(made_of) if rows & on_disk]
        if expected:
            assert (first, last) == (expected[0], expected[-1] + 1)
        else:  # no row is made from the moment's (sampled, or the last row on disk left out): the nearest
            assert last - first == 1 and min(abs(i - begin) for i in made_of[first]) <= 25 / len(taken) + 1


def test_in_training_the_window_holding_the_moment_is_scored_by_the_moment_s_rows():
    head = RelevanceHead()
    head.temperature = 0.5
    sentences = torch.tensor([[1.0, 0.0]])
    rows = torch.tensor([[0.0, 1.0], [1.0, 0.0], [1.0, 0.0], [0.6, 0.8]])  # cosines 0, 1, 1, 0.6
    windows = torch.stack([rows, rows])
    logits = head.training_logits(sentences, windows, (torch.tensor([0, 0]), torch.tensor([0, 1])),
                                  torch.tensor([[0, 2], [0, 4]]), torch.tensor([1.0, 0.0]))
    # holding: the mean of its moment's rows 0 and 1 ((0 + 1) / 2); without: its best row (1)
    assert torch.allclose(logits, torch.tensor([0.5, 1.0]) / 0.5)
    assert torch.allclose(head.logits(sentences, windows), torch.tensor([[1.0, 1.0]]) / 0.5)  # grounding: best rows


def test_a_window_of_an_hdf5_movie_is_read_alone(tmp_path, long_root):
    path = tmp_path / "movies.h5"
    rows = np.random.default_rng(0).standard_normal((1000, 8)).astype(np.float16)
    with h5py.File(path, "w") as f:
        f["movie"] = rows
    source = HDF5Features(str(path))
    assert source.reads_rows and np.array_equal(source.read_rows("movie", 100, 164), source.read("movie")[100:164])
    with h5py.File(tmp_path / "second.h5", "w") as f:
        f["movie"] = rows[:, :4]
    with h5py.File(tmp_path / "shorter.h5", "w") as f:
        f["movie"] = rows[:990, :4]
    for second, alone in (("second.h5", True), ("shorter.h5", False)):  # unequal streams are resampled whole
        joined = ConcatenatedFeatures([source, HDF5Features(str(tmp_path / second))], 0.1)
        assert joined.rows_alone("movie") is alone
        assert np.allclose(joined.read_rows("movie", 100, 164), joined.read("movie")[100:164], atol=1e-6)
    cfg = load_config(SYNTHETIC_CONFIG, ["DATASETS.ROOT", long_root[0], "DATASETS.CATALOG", long_root[1], *LONG,
                                         "MODEL.DEVICE", "cpu", *RANKED])
    dataset = RunData(cfg).datasets(["long_train"])[0]
    whole = dataset.features.read

    def refuse(video):
        raise AssertionError(f"{video} read whole for a window")

    dataset.features.read = refuse
    item = dataset[(0, 1)]
    dataset.features.read = whole
    window = dataset.item_window(0, 1)
    assert torch.equal(item["feats"], torch.from_numpy(dataset.clip_input.take(dataset.clip_input.base(
        whole(dataset.videos[dataset.video_ids[0]])[window.first:window.last]))[0]))
    assert item["ranked"].feats.shape[0] == 4


def test_a_clip_input_that_resamples_rows_without_saying_how_is_refused_naming_it(long_root):
    class HalvedClips(ClipInput):  # a plug-in's input that keeps every other row, and no row_sources
        def base(self, feats):
            return super().base(feats)[::2]

        def describe(self):
            return "HalvedClips"

    cfg = load_config(SYNTHETIC_CONFIG, ["DATASETS.ROOT", long_root[0], "DATASETS.CATALOG", long_root[1], *LONG,
                                         "MODEL.DEVICE", "cpu", *RANKED])
    dataset = RunData(cfg).datasets(["long_train"])[0]
    windows = dataset.ranked_windows(0, 1)
    on_disk, made = windows[0].last - windows[0].first, dataset.clip_input.num_clips
    assert dataset.ranked_fields(0, windows, [0])["ranked"].sources.shape[:2] == (len(windows), made)
    dataset.clip_input = HalvedClips(made)
    with pytest.raises(TanError, match=rf"the clip input HalvedClips makes {(on_disk + 1) // 2} rows of a window of "
                                       rf"{on_disk}, and its row_sources says where {on_disk} come from.*"
                                       r"INPUT.TRAIN_WINDOW.RANKED_WINDOWS"):
        dataset.ranked_fields(0, windows, [0])


def test_the_final_score_is_the_product_or_the_normalised_sum():
    scores, logits = torch.tensor([0.8, 0.4, 0.6]), torch.tensor([2.0, 4.0, 2.0])
    probability = torch.tensor([0.2, 0.7, 0.2])
    product, total = (RelevanceStage(None, 3, score, "") for score in ("product", "sum"))
    assert final_scores(product, False, scores, logits, probability).tolist() == pytest.approx([0.16, 0.28, 0.12])
    assert final_scores(total, False, scores, logits, probability).tolist() == pytest.approx([1.0, 1.0, 0.5])
    assert final_scores(None, True, scores, None, None).tolist() == pytest.approx([1.0, 0.0, 0.5])  # same order
    assert final_scores(None, False, scores, None, None) is scores


@pytest.mark.parametrize("value", ["0", "-2"])
def test_a_top_k_that_is_not_a_number_of_windows_is_refused_naming_the_key(value):
    with pytest.raises(TanError, match=r"^config key TEST\.WINDOW\.TOP_K: expected a number of windows >= 1"):
        load_config(SYNTHETIC_CONFIG, ["TEST.WINDOW.TOP_K", value])


@pytest.mark.parametrize("key, value, message", [
    ("INPUT.TRAIN_WINDOW.RANKED_WINDOWS", "-1", "expected a number of windows >= 0"),
    ("MODEL.RELEVANCE.TEMPERATURE", "0.0", "expected a positive number"),
    ("TEST.WINDOW.RELEVANCE", "best", "expected 'auto' or 'learned' or 'pooled' or 'none'"),
    ("TEST.WINDOW.SCORE", "max", "expected 'product' or 'sum'"),
])
def test_bad_relevance_settings_are_refused_naming_the_key(key, value, message):
    with pytest.raises(TanError, match=f"^config key {key}: {message}"):
        load_config(SYNTHETIC_CONFIG, [key, value])
    with pytest.raises(TanError) as refused:
        load_config(SYNTHETIC_CONFIG, ["MODEL.RELEVANCE.ENABLED", "True"])
    assert str(refused.value) == (
        "config key INPUT.TRAIN_WINDOW.RANKED_WINDOWS: 0 gives the relevance head's loss (MODEL.RELEVANCE.ENABLED "
        "True, MODEL.RELEVANCE.LOSS_WEIGHT 1) no windows to rank: in training, each query is ranked in this many "
        "windows of its video. Set it to 1 or more (4, say), or turn the loss off")
    with pytest.raises(TanError, match=r"RANKED_WINDOWS: 0 gives the relevance head's loss \(.*\) and the model's "
                                       r"ranking loss \(MODEL.WINDOW_RANKING.LOSS_WEIGHT 0.5\) no windows to rank"):
        load_config(SYNTHETIC_CONFIG, ["MODEL.RELEVANCE.ENABLED", "True", "MODEL.WINDOW_RANKING.LOSS_WEIGHT", "0.5"])
    cfg = load_config(SYNTHETIC_CONFIG, ["INPUT.TRAIN_WINDOW.RANKED_WINDOWS", "2"])
    with pytest.raises(TanError, match="RANKED_WINDOWS 2: the windows of a video are ranked in training by windows"):
        RunData(cfg)


def test_a_relevance_run_trains_both_cross_window_losses_and_its_checkpoint_holds_the_head(ranked_run):
    out, log = ranked_run
    stored = torch.load(os.path.join(out, "model_final.pth"), map_location="cpu", weights_only=False)
    assert any(name.startswith("relevance.") for name in stored["model"])
    for term in ("model_loss", "window_relevance", "window_ranking"):
        assert term in log
    assert "long_test: each sentence grounded in its top 3 windows by the model's relevance head" in log


def test_the_full_model_scores_only_the_top_k_windows_of_each_sentence(ranked_run, long_root):
    out, _ = ranked_run
    feats = _first_video(long_root[2])
    counted = {}
    for relevance in ("auto", "none"):
        model = tan.load_model(os.path.join(out, "model_final.pth"),
                               overrides=["DATASETS.ROOT", long_root[0], "TEST.WINDOW.RELEVANCE", relevance])
        core, windows = model.model, []
        encode = core.encode_video
        core.encode_video = lambda rows, **kw: (windows.append(len(rows)), encode(rows, **kw))[1]
        video = model.encode_video(feats, 300.0)
        moments = model.ground(video, ["a man folds the knife."], topk=3)[0]
        counted[relevance] = sum(windows)
        assert len(moments) == 3 and all(0 <= m.start < m.end <= 300.0 for m in moments)
    assert counted == {"auto": 3, "none": 11}  # 11 windows of 50 s every 25 s over 300 s


def _first_video(path):
    with h5py.File(path, "r") as f:
        return f[sorted(f)[0]][()]


def test_tan_predict_refuses_a_top_k_above_the_video_s_windows_in_one_line(ranked_run, long_root, tmp_path):
    out, _ = ranked_run
    features = tmp_path / "video.npy"
    np.save(features, _first_video(long_root[2]))
    proc = run_main("predict", "--ckpt", os.path.join(out, "model_final.pth"), "--features", str(features),
                    "--duration", "300", "--query", "a man folds the knife.", "DATASETS.ROOT", long_root[0],
                    "TEST.WINDOW.TOP_K", "12")
    assert proc.returncode != 0
    error = [line for line in proc.stderr.splitlines() if "ERROR" in line or "Traceback" in line]
    assert len(error) == 1 and "TEST.WINDOW.TOP_K 12 is above the 11 windows of this video" in error[0], proc.stderr
    proc = run_main("predict", "--ckpt", os.path.join(out, "model_final.pth"), "--features", str(features),
                    "--duration", "300", "--query", "a man folds the knife.", "DATASETS.ROOT", long_root[0],
                    "TEST.WINDOW.RELEVANCE", "pooled")
    assert proc.returncode != 0 and "TEST.WINDOW.RELEVANCE 'pooled'" in proc.stderr and "Traceback" not in proc.stderr


def test_a_model_without_a_head_is_refused_the_learned_stage():
    cfg = load_config(SYNTHETIC_CONFIG, ["TEST.WINDOW.RELEVANCE", "learned"])
    with pytest.raises(TanError, match="TEST.WINDOW.RELEVANCE 'learned': the model has no relevance head"):
        relevance_stage(cfg, build_model(cfg))
    cfg = load_config(SYNTHETIC_CONFIG, ["TEST.WINDOW.RELEVANCE", "pooled"])  # sentences of GloVe, clips of C3D
    with pytest.raises(TanError, match="'pooled' compares the sentence's vectors with the clip features directly"):
        relevance_stage(cfg, build_model(cfg))


@pytest.mark.slow
def test_a_relevance_run_killed_mid_training_resumes_bit_for_bit(ranked_run, long_root, tmp_path):
    straight, _ = ranked_run
    args = train_args(long_root, tmp_path / "killed")
    env = dict(os.environ, PYTHONUNBUFFERED="1", **ONE_THREAD)
    proc = subprocess.Popen([sys.executable, os.path.join(REPO, "tools", "train_net.py"), *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.time() + 300
        while not (tmp_path / "killed" / "model_1e.pth").exists():
            assert proc.poll() is None and time.time() < deadline, "no checkpoint of epoch 1"
            time.sleep(0.05)
        time.sleep(0.3)  # into epoch 2
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert not (tmp_path / "killed" / "model_final.pth").exists()
    resumed = run_tool("train_net", *args, env=ONE_THREAD)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    ours, theirs = (torch.load(os.path.join(folder, "model_final.pth"), map_location="cpu", weights_only=False)["model"]
                    for folder in (tmp_path / "killed", straight))
    assert ours.keys() == theirs.keys() and any(k.startswith("relevance.") for k in ours)
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)


@pytest.mark.slow
def test_a_model_trained_without_a_head_takes_one_on_through_model_weight_started_fresh(ranked_run, long_root,
                                                                                       tmp_path):
    """MODEL.WEIGHT of a model trained without the relevance head, in a config with it: the model's
    weights are loaded, the head starts from its own initial weights, and the log says so (the strict
    load refused it, advising to turn the head off)."""
    out, _ = ranked_run
    saved = torch.load(os.path.join(out, "model_1e.pth"), map_location="cpu", weights_only=False)
    headless = tmp_path / "headless.pth"
    torch.save({"model": {k: v for k, v in saved["model"].items() if not k.startswith("relevance.")}}, headless)
    args = train_args(long_root, tmp_path / "with_head", "MODEL.WEIGHT", str(headless), "SOLVER.ITERS_PER_EPOCH", "1",
                      "--skip-test")
    proc = run_main("train_net", *args)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    fresh = sum(k.startswith("relevance.") for k in saved["model"])
    assert (f"{headless} holds no window relevance head (MODEL.RELEVANCE.ENABLED): the model's weights are loaded "
            f"from it, and the head starts fresh ({fresh} tensors)") in log
    # a part of the head in the checkpoint is no head trained without one: still refused, naming what differs
    torch.save({"model": {k: v for k, v in saved["model"].items() if k != next(iter(
        k for k in saved["model"] if k.startswith("relevance.")))}}, headless)
    proc = run_main("train_net", *train_args(long_root, tmp_path / "part", "MODEL.WEIGHT", str(headless)))
    assert proc.returncode == 2 and "missing from the checkpoint: relevance." in proc.stdout + proc.stderr


@pytest.mark.parametrize("config, extra", [
    ("mmn_synthetic.yaml", ["INPUT.TRAIN_WINDOW.LENGTH", str(LENGTH)]),
    ("ms2dtan_synthetic.yaml", ["TEST.WINDOW.LONGER_THAN", "100"]),  # windows of its own rows; 300 s tested by them
])
def test_every_built_in_model_trains_a_relevance_head_and_grounds_by_it(config, extra, long_root, tmp_path):
    root, catalog = long_root[:2]
    proc = run_main("train_net", "--config-file", os.path.join(REPO, "configs", config), "DATASETS.ROOT", root,
                    "DATASETS.CATALOG", catalog, *LONG, "OUTPUT_DIR", str(tmp_path), "MODEL.DEVICE", "cpu",
                    "DATALOADER.NUM_WORKERS", "0", "SOLVER.MAX_EPOCH", "1", "SOLVER.TEST_PERIOD", "0",
                    "SOLVER.CHECKPOINT_PERIOD", "1", "INPUT.TRAIN_WINDOW.RANKED_WINDOWS", "3",
                    "MODEL.RELEVANCE.ENABLED", "True", "MODEL.WINDOW_RANKING.LOSS_WEIGHT", "1.0", "TEST.WINDOW.TOP_K", "2",
                    *extra)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    assert "window_relevance" in log and "window_ranking" in log
    assert "long_test: each sentence grounded in its top 2 windows by the model's relevance head" in log


def test_a_checkpoint_with_a_head_in_a_config_without_one_says_which_key_to_set(ranked_run, long_root):
    out, _ = ranked_run
    proc = run_main("test_net", "--config-file", SYNTHETIC_CONFIG, "--ckpt", os.path.join(out, "model_final.pth"),
                    "DATASETS.ROOT", long_root[0], "DATASETS.CATALOG", long_root[1], *LONG, "MODEL.DEVICE", "cpu",
                    "OUTPUT_DIR", os.path.join(out, "elsewhere"))
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Traceback" not in log
    assert "the window relevance head is in the checkpoint only: set MODEL.RELEVANCE.ENABLED True" in log


def test_the_listwise_loss_is_over_each_sentence_s_windows_with_and_without_its_moment():
    from tan.modeling.window_losses import best_scores, listwise_loss

    logits = torch.tensor([2.0, 0.0, 0.0, 1.0, 1.0, 5.0])
    query = torch.tensor([0, 0, 0, 1, 1, 2])
    labels = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.0, 1.0])  # sentence 2 has no window without its moment
    expected = ((np.log(np.exp(2) + 2) - 2) + np.log(2)) / 2
    assert float(listwise_loss(logits, query, labels, 4)) == pytest.approx(expected)  # sentence 3 has no pair
    maps = torch.tensor([[[0.1, 0.7], [0.0, 0.2]]])
    assert best_scores(maps).tolist() == pytest.approx([0.7])
    assert best_scores([maps, torch.tensor([[[0.9]]])]).tolist() == pytest.approx([0.9])  # a map per scale


def test_an_evaluation_refuses_a_top_k_above_every_video_s_windows(ranked_run, long_root):
    out, _ = ranked_run
    proc = run_main("test_net", "--ckpt", os.path.join(out, "model_final.pth"), "DATASETS.ROOT", long_root[0],
                    "OUTPUT_DIR", os.path.join(out, "top_k"), "TEST.WINDOW.TOP_K", "12")
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Traceback" not in log
    assert "TEST.WINDOW.TOP_K 12 is above the 11 windows of any of the 4 videos of long_test" in log


def test_the_head_is_part_of_the_model_and_its_parameters_come_last():
    """The window stage is declared by the contract (None without one) and the head, set after the
    model's own modules, lists its parameters last, as the optimizer's saved state counts them."""
    plain = build_model(load_config(SYNTHETIC_CONFIG, ["MODEL.DEVICE", "cpu"]))
    assert plain.relevance is None and plain.window_losses is None
    model = build_model(load_config(SYNTHETIC_CONFIG, ["MODEL.DEVICE", "cpu", *RANKED]))
    names = [name for name, _ in model.named_parameters()]
    head = [n for n in names if n.startswith("relevance.")]
    assert head and names[-len(head):] == head
    assert list(model.state_dict())[-len(head):] == head
    assert model.window_losses.relevance_weight == 1.0 and model.window_losses.ranking_weight == 1.0


def test_a_model_whose_forward_cannot_compute_the_window_losses_is_refused_naming_it():
    from tan.modeling import MODELS

    class OldForward(MODELS.get("TAN")):  # a plug-in's forward of the contract before the window stage
        def forward(self, feats, queries, wordlens, video_index=None):
            return super().forward(feats, queries, wordlens, video_index)

    cfg = load_config(SYNTHETIC_CONFIG, ["MODEL.DEVICE", "cpu", *RANKED])
    with pytest.raises(TanError, match=r"overrides forward without ranked and window_terms: with MODEL.RELEVANCE or "
                                       r"MODEL.WINDOW_RANKING its forward computes the cross-window losses"):
        build_model(cfg, OldForward)
    assert build_model(load_config(SYNTHETIC_CONFIG, ["MODEL.DEVICE", "cpu"]), OldForward).relevance is None


def test_moment_detr_s_metrics_are_turned_on_by_their_own_key_not_by_test_evaluators():
    with pytest.raises(TanError, match=r"^config key TEST.EVALUATORS: 'moment_detr' is turned on for every dataset by "
                                       r"TEST.DETR_METRICS 'on'"):
        load_config(SYNTHETIC_CONFIG, ["TEST.EVALUATORS", "['moment_detr']"])
