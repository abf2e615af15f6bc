"""Long videos in training and in tan-test: training items drawn as windows that hold the moment
(INPUT.TRAIN_WINDOW), the same in any worker and on a resume; the evaluation of datasets whose
videos are longer than the trained span, by windows (TEST.WINDOW), as the API grounds them."""
import json
import os

import h5py
import numpy as np
import pytest
import torch

import tan
from tan.config import load_config
from tan.data.build import RunData
from tan.data.features.clip_inputs import ResampledClips
from tan.data.training_windows import TrainingWindows
from tan.errors import TanError

from conftest import ONE_THREAD, REPO, SYNTHETIC_CONFIG, long_catalog, run_main

LENGTH = 50.0
LONG = ["DATASETS.TRAIN", '("long_train",)', "DATASETS.VAL", "()", "DATASETS.TEST", '("long_test",)']


@pytest.fixture(scope="module")
def long_root(synthetic_root, tmp_path_factory):
    """(DATASETS.ROOT with the synthetic dataset's word vectors, the catalog of long_train (40 videos
    of 2-4 minutes) and long_test (6 videos of 5 minutes), the training and the test features)."""
    catalog, train_features, test_features = long_catalog(
        tmp_path_factory.mktemp("long"), {"train": 40, "test": 6}, {"train": (120, 240), "test": (300, 300)}, seed=1)
    return synthetic_root, catalog, train_features, test_features


def long_config(long_root, *extra, config=SYNTHETIC_CONFIG):
    root, catalog = long_root[:2]
    return load_config(config, ["DATASETS.ROOT", root, "DATASETS.CATALOG", catalog, *LONG, "MODEL.DEVICE", "cpu",
                                "DATALOADER.NUM_WORKERS", "0", *extra])


def test_a_training_item_of_a_long_video_is_a_window_holding_its_moment_drawn_again_the_same(long_root):
    data = RunData(long_config(long_root, "INPUT.TRAIN_WINDOW.LENGTH", LENGTH))
    dataset = data.dataset("long_train")
    clips = dataset.clip_input
    assert isinstance(clips, ResampledClips)
    starts = set()
    for index in range(10):
        moment, duration = dataset.moments[index], float(dataset.durations[index])
        assert duration > LENGTH
        whole = dataset[index]  # an evaluation item: the whole video
        assert whole["duration"] == pytest.approx(duration) and torch.equal(whole["moment"], torch.from_numpy(moment))
        for epoch in (0, 1):
            item = dataset[(index, epoch)]
            window = dataset.item_window(index, epoch)
            assert item["duration"] == pytest.approx(window.duration) and LENGTH <= window.duration <= LENGTH + 0.5
            assert 0 <= window.start and window.end <= duration + 1e-4 and window.holds(moment)
            # the moment where it is in the window, its length kept (10 s in a 50 s window)
            assert item["moment"].tolist() == pytest.approx((moment - window.start).tolist(), abs=1e-4)
            assert float(item["moment"][1] - item["moment"][0]) == pytest.approx(10.0, abs=1e-4)
            # the window's own rows, prepared as a video of its own (L2-normalised, resampled to 64 clips)
            with h5py.File(long_root[2]) as h5:
                rows = h5[dataset.videos[dataset.video_ids[index]]][()]
            assert window.first == round(window.start / 0.5) and window.last - window.first == round(window.duration / 0.5)
            assert torch.equal(item["feats"], torch.from_numpy(clips.base(rows[window.first:window.last])))
            # drawn from (SEED, epoch, dataset, query): the same key gives the same item
            again = dataset[(index, epoch)]
            assert all(torch.equal(item[k], again[k]) for k in ("feats", "moment", "gt_moments"))
            starts.add((index, round(window.start, 3)))
    assert len(starts) >= 15  # the epochs draw other windows


def test_a_moment_longer_than_the_window_gets_a_window_inside_it_and_short_videos_stay_whole():
    windows = TrainingWindows(20.0, 30.0)
    rng = np.random.default_rng(0)
    for _ in range(50):
        start = windows.draw(rng, 100.0, (40.0, 70.0))  # 30 s moment, 20 s window
        assert 40.0 <= start <= 50.0
        start = windows.draw(rng, 100.0, (90.0, 95.0))  # near the end: the window ends by the video's end
        assert 75.0 <= start <= 80.0
        assert windows.draw(rng, 100.0, (0.0, 4.0)) == 0.0  # at the start: the one window from 0 holds it
        assert 10.0 <= windows.draw(rng, 100.0, (30.0, 34.0)) <= 30.0
    assert not windows.applies_to(30.0) and windows.applies_to(30.5)
    assert windows.trained_seconds(25.0) == 25.0 and windows.trained_seconds(300.0) == 20.0


def test_the_trained_span_is_the_window_and_a_model_with_windows_of_its_own_refuses_them(long_root, synthetic_root):
    assert RunData(long_config(long_root)).trained_span()["median"] > 150  # whole: the videos' own
    span = RunData(long_config(long_root, "INPUT.TRAIN_WINDOW.LENGTH", LENGTH)).trained_span()
    assert span == {"median": LENGTH, "longest": LENGTH, "videos": 40}
    # videos up to 200 s taken whole: the longest is then a whole video
    data = RunData(long_config(long_root, "INPUT.TRAIN_WINDOW.LENGTH", LENGTH, "INPUT.TRAIN_WINDOW.LONGER_THAN", 200.0))
    durations = data.dataset("long_train").durations.astype(np.float64)
    taken = np.where(durations > 200, LENGTH, durations)
    assert 0 < (durations > 200).sum() < len(durations)
    assert data.trained_span() == {"median": pytest.approx(float(np.median(taken)), abs=1e-3),
                                   "longest": pytest.approx(float(durations[durations <= 200].max()), abs=1e-3),
                                   "videos": 40}
    with pytest.raises(TanError, match=r"INPUT.TRAIN_WINDOW.LENGTH 50.0: MODEL.ARCHITECTURE 'MS_TAN' already "
                                       r"trains on windows of its own clips"):
        RunData(long_config(long_root, "INPUT.TRAIN_WINDOW.LENGTH", LENGTH,
                            config=os.path.join(REPO, "configs", "ms2dtan_synthetic.yaml")))
    with pytest.raises(TanError, match=r"INPUT.TRAIN_WINDOW.LENGTH.*expected seconds >= 0"):
        load_config(SYNTHETIC_CONFIG, ["DATASETS.ROOT", synthetic_root, "INPUT.TRAIN_WINDOW.LENGTH", "-5.0"])
    with pytest.raises(TanError, match=r"INPUT.TRAIN_WINDOW.LONGER_THAN.*20.0 is shorter than INPUT.TRAIN_WINDOW.LENGTH"):
        load_config(SYNTHETIC_CONFIG, ["DATASETS.ROOT", synthetic_root, "INPUT.TRAIN_WINDOW.LENGTH", "50.0",
                                       "INPUT.TRAIN_WINDOW.LONGER_THAN", "20.0"])


def _batches(cfg, epoch, count=2):
    loader = RunData(cfg).train_loader(False)
    assert loader.sampler.keyed_by_epoch  # (query, epoch) keys: a resumed epoch draws its windows again
    loader.sampler.set_epoch(epoch)
    batches = []
    for batch in loader:
        batches.append({k: batch[k] for k in ("feats", "moments", "durations", "indices")})
        if len(batches) == count:
            break
    return batches


def test_loader_workers_draw_the_windows_the_main_process_draws(long_root):
    cfg = long_config(long_root, "INPUT.TRAIN_WINDOW.LENGTH", LENGTH, "SOLVER.BATCH_SIZE", 8)
    alone = _batches(cfg, 3)
    cfg.defrost()
    cfg.DATALOADER.NUM_WORKERS = 2
    workers = _batches(cfg, 3)
    for a, b in zip(alone, workers):
        assert all(torch.equal(a[k], b[k]) for k in a)
    assert (alone[0]["durations"] < LENGTH + 1).all()
    assert not torch.equal(_batches(cfg, 4, 1)[0]["moments"], alone[0]["moments"])  # another epoch, other draws


def test_a_video_batch_keeps_the_sentences_whose_moments_its_window_holds(synthetic_root):
    """MMN's batches of videos with their sentences: the synthetic videos (24-80 s, 2-4 moments
    each) in windows of 20 s: the first sentence's moment is held, any other sentence kept is too."""
    cfg = load_config(os.path.join(REPO, "configs", "mmn_synthetic.yaml"),
                      ["DATASETS.ROOT", synthetic_root, "MODEL.DEVICE", "cpu", "INPUT.TRAIN_WINDOW.LENGTH", "20.0"])
    data = RunData(cfg)
    assert data.declared.batches_by_video
    groups = data.train_loader(False, by_video=True).dataset
    dataset = groups.datasets[0]
    kept_others = 0
    for position in range(40):
        every = groups.sentences(position)
        item = groups[(position, 2)]
        window = dataset.item_window(int(every[0]), 2, rng_key=position)
        queries = item["indices"].tolist()
        assert queries[0] == every[0] and set(queries) <= set(every.tolist())
        if window is None:  # a video of at most 20 s: whole, every sentence
            assert queries == every.tolist()
            continue
        assert item["durations"].tolist() == pytest.approx([window.duration] * len(queries))
        for q, moment in zip(queries, item["moments"]):
            assert 0 <= float(moment[0]) <= float(moment[1]) <= window.duration + 1e-4
            if q != queries[0]:
                assert window.holds(dataset.moments[q])
                kept_others += 1
        left = set(every.tolist()) - set(queries)
        assert all(not window.holds(dataset.moments[q]) for q in left)
        assert item["feats"].shape == (cfg.INPUT.NUM_PRE_CLIPS, 128)
    assert kept_others > 0
    # a video longer than the window gives an item anchored on each of its sentences, a shorter one one item
    anchors = {}
    for video, anchor in groups.groups:
        anchors.setdefault(video, []).append(anchor)
    for video, (_, queries) in enumerate(groups.videos):
        long = float(dataset.durations[queries[0]]) > 20.0
        assert anchors[video] == (queries.tolist() if long else [-1])
    assert len(groups) > len(groups.videos)


def test_sampled_sentences_of_a_window_are_drawn_among_those_it_holds(synthetic_root):
    """DATALOADER.SENTENCES_PER_VIDEO with windows: the anchor and a sample of the sentences the window
    holds, not of the whole video's (most of which lie outside it)."""
    cfg = load_config(os.path.join(REPO, "configs", "mmn_synthetic.yaml"),
                      ["DATASETS.ROOT", synthetic_root, "MODEL.DEVICE", "cpu", "INPUT.TRAIN_WINDOW.LENGTH", "40.0",
                       "DATALOADER.SENTENCES_PER_VIDEO", "2"])
    groups = RunData(cfg).train_loader(False, by_video=True).dataset
    dataset = groups.datasets[0]
    pairs = 0
    for position, (_, anchor) in enumerate(groups.groups[:300]):
        if anchor < 0:
            continue
        item = groups[(position, 3)]
        queries = item["indices"].tolist()
        window = dataset.item_window(anchor, 3, rng_key=position)
        held = [anchor] + [q for q in groups.sentences(position)[1:] if window.holds(dataset.moments[q])]
        assert queries[0] == anchor and len(queries) == min(2, len(held)) and set(queries) <= set(held)
        pairs += len(queries) == 2
    assert pairs > 0


@pytest.fixture(scope="module")
def windowed_run(long_root, tmp_path_factory):
    """A short 2D-TAN run on long_train by windows of 50 s, tested by windows on long_test."""
    root, catalog = long_root[:2]
    out = str(tmp_path_factory.mktemp("windowed_run"))
    proc = run_main("train_net", "--config-file", SYNTHETIC_CONFIG, "DATASETS.ROOT", root, "DATASETS.CATALOG", catalog,
                    *LONG, "OUTPUT_DIR", out, "MODEL.DEVICE", "cpu", "SOLVER.MAX_EPOCH", "2", "SOLVER.TEST_PERIOD", "1",
                    "SOLVER.CHECKPOINT_PERIOD", "2", "INPUT.TRAIN_WINDOW.LENGTH", str(LENGTH))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out, proc


def test_a_run_trained_by_windows_records_them_and_tests_long_videos_by_windows(windowed_run):
    out, proc = windowed_run
    stored = torch.load(os.path.join(out, "model_final.pth"), map_location="cpu", weights_only=False)
    assert stored["trained_span"] == {"median": LENGTH, "longest": LENGTH, "videos": 40}
    log = proc.stdout + proc.stderr
    assert "long videos: windows of 50 s every 25 s for videos longer than 50 s" in log
    assert "long_test: 6 queries of 6 videos longer than 50 s grounded by windows of 50 s every 25 s" in log
    for folder in ("model_final", "model_best"):  # the periodic evaluation windowed too, and kept a best model
        metrics = json.load(open(os.path.join(out, "inference", folder, "long_test", "metrics.json")))
        assert metrics["windows"] == {"videos": 6, "queries": 6, "length": LENGTH, "stride": 25.0,
                                      "longer_than": LENGTH}


def test_tan_test_grounds_long_videos_by_windows_as_the_api_does(windowed_run, long_root, tmp_path):
    out, _ = windowed_run
    root, catalog, _, features = long_root
    checkpoint = os.path.join(out, "model_final.pth")
    proc = run_main("test_net", "--ckpt", checkpoint, "OUTPUT_DIR", str(tmp_path / "windowed"), "DATASETS.ROOT", root,
                    "DATASETS.CATALOG", catalog)
    assert proc.returncode == 0, proc.stderr[-3000:]
    folder = tmp_path / "windowed" / "inference" / "model_final" / "long_test"
    lines = [json.loads(line) for line in open(folder / "predictions.jsonl")]
    model = tan.load_model(checkpoint, overrides=["DATASETS.ROOT", root])
    with h5py.File(features) as h5:
        for line in lines:
            video = model.encode_video(h5[line["video"]][()], line["duration"])
            assert video.windows is not None and len(video.windows.spans) == 11
            [moments] = model.ground(video, [line["sentence"]], topk=5)
            assert sum(line["moments"][:5], []) == pytest.approx([t for m in moments for t in (m.start, m.end)],
                                                                 abs=2e-4)
            assert line["scores"][:5] == pytest.approx([m.score for m in moments], abs=2e-6)

    whole = run_main("test_net", "--ckpt", checkpoint, "OUTPUT_DIR", str(tmp_path / "whole"), "DATASETS.ROOT", root,
                     "DATASETS.CATALOG", catalog, "TEST.WINDOW.ENABLED", "False")
    assert whole.returncode == 0, whole.stderr[-3000:]
    assert "long videos: TEST.WINDOW.ENABLED is off: every video is scored whole" in whole.stdout + whole.stderr
    metrics = json.load(open(tmp_path / "whole" / "inference" / "model_final" / "long_test" / "metrics.json"))
    assert "windows" not in metrics
    scored_whole = [json.loads(line) for line in
                    open(tmp_path / "whole" / "inference" / "model_final" / "long_test" / "predictions.jsonl")]
    assert max(m[1] - m[0] for line in scored_whole for m in line["moments"][:1]) > 60  # a cell of 300 s / 16
    assert all(m[1] - m[0] <= LENGTH + 0.5 for line in lines for m in line["moments"])

    # the parity configs' setting: the evaluation scores whole, tan-predict and the API still window
    parity = run_main("test_net", "--ckpt", checkpoint, "OUTPUT_DIR", str(tmp_path / "parity"), "DATASETS.ROOT", root,
                      "DATASETS.CATALOG", catalog, "TEST.WINDOW.IN_EVALUATION", "False")
    assert parity.returncode == 0, parity.stderr[-3000:]
    assert ("long videos: TEST.WINDOW.IN_EVALUATION is off: the evaluation scores every video whole"
            in parity.stdout + parity.stderr)
    folder = tmp_path / "parity" / "inference" / "model_final" / "long_test"
    assert "windows" not in json.load(open(folder / "metrics.json"))
    assert [json.loads(line)["moments"] for line in open(folder / "predictions.jsonl")] == [
        line["moments"] for line in scored_whole]
    api = tan.load_model(checkpoint, overrides=["DATASETS.ROOT", root, "TEST.WINDOW.IN_EVALUATION", "False"])
    with h5py.File(features) as h5:
        assert api.encode_video(h5[lines[0]["video"]][()], lines[0]["duration"]).windows is not None


def test_an_mmn_run_trains_on_windows_of_its_videos(long_root, tmp_path):
    root, catalog = long_root[:2]
    proc = run_main("train_net", "--config-file", os.path.join(REPO, "configs", "mmn_synthetic.yaml"),
                    "DATASETS.ROOT", root, "DATASETS.CATALOG", catalog, *LONG, "OUTPUT_DIR", str(tmp_path),
                    "MODEL.DEVICE", "cpu", "SOLVER.MAX_EPOCH", "1", "SOLVER.ITERS_PER_EPOCH", "3",
                    "SOLVER.TEST_PERIOD", "0", "INPUT.TRAIN_WINDOW.LENGTH", str(LENGTH))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    stored = torch.load(tmp_path / "model_final.pth", map_location="cpu", weights_only=False)
    assert stored["trained_span"]["median"] == LENGTH
    assert "grounded by windows of 50 s" in proc.stdout + proc.stderr


def test_negative_windows_stay_away_from_the_moment_and_their_items_have_no_moment(long_root):
    windows = TrainingWindows(20.0, 30.0, 0.5)
    rng = np.random.default_rng(0)
    away = 0
    for _ in range(400):
        start = windows.draw(rng, 100.0, (40.0, 50.0))
        assert 0.0 <= start <= 80.0
        if start + 20.0 <= 40.0 or start >= 50.0:
            away += 1
        else:
            assert start <= 40.0 and start + 20.0 >= 50.0  # otherwise it holds the whole moment
    assert 160 <= away <= 240
    # no room away from the moment: the window holds it
    assert all(0.0 <= windows.draw(rng, 30.5, (5.0, 25.0)) <= 5.0 for _ in range(20))

    data = RunData(long_config(long_root, "INPUT.TRAIN_WINDOW.LENGTH", LENGTH, "INPUT.TRAIN_WINDOW.NEGATIVES", 0.5))
    dataset = data.dataset("long_train")
    empty = 0
    for index in range(20):
        item, window = dataset[(index, 0)], dataset.item_window(index, 0)
        if window.holds(dataset.moments[index]):
            assert float(item["moment"][1] - item["moment"][0]) == pytest.approx(10.0, abs=1e-4)
            continue
        empty += 1
        assert window.end <= dataset.moments[index][0] + 1e-4 or window.start >= dataset.moments[index][1] - 1e-4
        assert float(item["moment"][0]) == float(item["moment"][1]) in (0.0, pytest.approx(window.duration))
    assert 4 <= empty <= 16
    with pytest.raises(TanError, match=r"INPUT.TRAIN_WINDOW.NEGATIVES 0.5: MODEL.ARCHITECTURE 'MMN' trains on "
                                       r"batches of videos"):
        RunData(long_config(long_root, "INPUT.TRAIN_WINDOW.LENGTH", LENGTH, "INPUT.TRAIN_WINDOW.NEGATIVES", 0.5,
                            config=os.path.join(REPO, "configs", "mmn_synthetic.yaml")))
    with pytest.raises(TanError, match=r"INPUT.TRAIN_WINDOW.NEGATIVES.*expected a share in \[0, 1\)"):
        long_config(long_root, "INPUT.TRAIN_WINDOW.NEGATIVES", 1.0)


@pytest.mark.slow
def test_the_long_synthetic_config_finds_ten_second_moments_of_hour_long_videos(tmp_path):
    """configs/2dtan_synthetic_long.yaml as docs/long_videos.md runs it: trained on 50 s windows of
    2-5 minute videos, tested by windows on 5-minute and hour-long ones; scored whole, the same
    model loses the moments (a cell of a 5-minute video lasts 19 s)."""
    config = os.path.join(REPO, "configs", "2dtan_synthetic_long.yaml")
    root, out = str(tmp_path / "datasets"), str(tmp_path / "run")
    proc = run_main("train_net", "--config-file", config, "DATASETS.ROOT", root, "OUTPUT_DIR", out,
                    "MODEL.DEVICE", "cpu")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    final = os.path.join(out, "inference", "model_final")
    test = json.load(open(os.path.join(final, "synthetic_long_test", "metrics.json")))
    hour = json.load(open(os.path.join(final, "synthetic_long_test_hour", "metrics.json")))
    assert test["windows"]["videos"] == 200 and hour["windows"]["videos"] == 20
    assert test["R@1,IoU@0.5"] >= 75 and hour["R@1,IoU@0.5"] >= 50, (test, hour)

    whole = run_main("test_net", "--ckpt", os.path.join(out, "model_final.pth"), "DATASETS.ROOT", root,
                     "OUTPUT_DIR", str(tmp_path / "whole"), "TEST.WINDOW.ENABLED", "False")
    assert whole.returncode == 0, whole.stderr[-3000:]
    scored = json.load(open(tmp_path / "whole" / "inference" / "model_final" / "synthetic_long_test" / "metrics.json"))
    assert scored["R@1,IoU@0.5"] <= 20, scored


@pytest.mark.slow
def test_two_processes_share_the_long_videos_and_report_what_one_does(windowed_run, long_root, tmp_path):
    """tan-test under torchrun: each process grounds its share of the long videos by windows; the
    gathered predictions and metrics are those of one process."""
    import subprocess
    import sys

    out, _ = windowed_run
    root, catalog = long_root[:2]
    checkpoint = os.path.join(out, "model_final.pth")
    args = ["--ckpt", checkpoint, "DATASETS.ROOT", root, "DATASETS.CATALOG", catalog, "MODEL.DEVICE", "cpu",
            "DATALOADER.NUM_WORKERS", "0", "TEST.BATCH_SIZE", "2"]
    # one thread, as each process of the two: numbers of threads part in the last bits on some CPUs (an Intel
    # Xeon with AMX), which reorders the equal-looking moments of this barely trained model
    one = run_main("test_net", *args, "OUTPUT_DIR", str(tmp_path / "one"), env=ONE_THREAD)
    assert one.returncode == 0, one.stderr[-3000:]
    two = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                          os.path.join(REPO, "tools", "test_net.py"), *args, "OUTPUT_DIR", str(tmp_path / "two")],
                         env=dict(os.environ, OMP_NUM_THREADS="1"), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, timeout=600)
    assert two.returncode == 0, two.stdout[-3000:]
    folders = [tmp_path / run / "inference" / "model_final" / "long_test" for run in ("one", "two")]
    metrics = [json.load(open(f / "metrics.json")) for f in folders]
    assert metrics[0]["windows"] == metrics[1]["windows"] == {"videos": 6, "queries": 6, "length": LENGTH,
                                                              "stride": 25.0, "longer_than": LENGTH}
    assert {k: v for k, v in metrics[0].items() if k != "checkpoint"} == {
        k: v for k, v in metrics[1].items() if k != "checkpoint"}
    predictions = [[json.loads(line) for line in open(f / "predictions.jsonl")] for f in folders]
    assert len(predictions[0]) == len(predictions[1]) == 6
    for a, b in zip(*predictions):
        assert sum(a["moments"], []) == pytest.approx(sum(b["moments"], []), abs=2e-4)
        assert a["scores"] == pytest.approx(b["scores"], abs=2e-6)


def test_a_negative_window_shares_no_feature_row_with_an_off_grid_moment():
    """Moments between rows (of 0.5 s here): the window takes every row it overlaps, so it keeps
    clear of the moment's first and last rows, and its item's moment is empty."""
    from tan.data.training_windows import ItemWindow

    windows = TrainingWindows(20.0, 30.0, 0.99)
    rng = np.random.default_rng(1)
    away = 0
    for _ in range(300):
        moment = tuple(sorted(rng.uniform(0, 100, size=2)))
        if moment[1] - moment[0] > 15:
            continue
        window = ItemWindow.of(200, 100.0, windows.draw(rng, 100.0, moment, rate=2.0), 20.0)
        placed = window.placed(np.asarray(moment, dtype=np.float32))
        if not window.holds(moment):
            away += 1
            assert window.last <= np.floor(moment[0] * 2) or window.first >= np.ceil(moment[1] * 2)
            assert placed[0] == placed[1]
    assert away > 50


def test_the_windowed_queries_skip_the_whole_video_pass_and_the_others_are_scored_as_before(windowed_run,
                                                                                           synthetic_root, tmp_path):
    """The synthetic test split (24-80 s videos) with windows for the videos over 60 s: those are
    left out of the usual pass (tan.data.loaders.loader_without) and grounded by windows; the others
    get the moments of an evaluation without windows."""
    from tan.data.loaders import loader_without

    out, _ = windowed_run
    checkpoint = os.path.join(out, "model_final.pth")
    common = ["--ckpt", checkpoint, "DATASETS.ROOT", synthetic_root, "DATASETS.CATALOG", "", "DATASETS.TRAIN",
              "()", "DATASETS.TEST", '("synthetic_test",)', "MODEL.DEVICE", "cpu"]
    runs = {}
    for name, extra in (("windowed", ["TEST.WINDOW.LENGTH", "30.0", "TEST.WINDOW.LONGER_THAN", "60.0"]),
                        ("whole", ["TEST.WINDOW.ENABLED", "False"])):
        proc = run_main("test_net", *common, *extra, "OUTPUT_DIR", str(tmp_path / name))
        assert proc.returncode == 0, proc.stderr[-3000:]
        folder = tmp_path / name / "inference" / "model_final" / "synthetic_test"
        runs[name] = ([json.loads(line) for line in open(folder / "predictions.jsonl")],
                      json.load(open(folder / "metrics.json")))
    (windowed, metrics), (whole, _) = runs["windowed"], runs["whole"]
    long = [a["duration"] > 60 for a in windowed]
    assert metrics["windows"]["queries"] == sum(long) and 0 < sum(long) < len(long)
    for a, b, is_long in zip(windowed, whole, long):
        if is_long:
            assert all(m[1] - m[0] <= 30.5 for m in a["moments"])
        else:
            assert sum(a["moments"], []) == pytest.approx(sum(b["moments"], []), abs=2e-4)

    cfg = load_config(SYNTHETIC_CONFIG, ["DATASETS.ROOT", synthetic_root, "MODEL.DEVICE", "cpu", "TEST.BATCH_SIZE", 16])
    data = RunData(cfg)
    [loader] = data.test_loaders(False)
    dataset = loader.dataset
    skip = [i for i in range(len(dataset)) if dataset.durations[i] > 60]
    seen = [i for batch in loader_without(loader, skip) for i in batch["indices"].tolist()]
    assert sorted(seen) == sorted(set(range(len(dataset))) - set(skip))
    assert loader_without(loader, range(len(dataset))) is None
    [videos] = data.test_loaders(False, by_video=True)  # MMN's: videos with their sentences
    seen = [i for batch in loader_without(videos, skip) for i in batch["indices"].tolist()]
    assert sorted(seen) == sorted(set(range(len(dataset))) - set(skip))
