"""Windowed grounding of videos longer than those a model was trained on (tan/engine/long_videos/windows.py,
docs/long_videos.md): the windows, the merge across them, the API and tan-predict."""
import json
import logging
import os

import numpy as np
import pytest
import torch

import tan
from tan.config import load_config
from tan.config.architecture import feature_size
from tan.engine.long_videos.windows import WindowSettings, merge_windows, window_rows, window_settings, window_spans
from tan.errors import TanError
from tan.modeling import build_model
from tan.structures.moments import temporal_iou
from tan.engine.checkpoints import Checkpointer, run_info
from tan_apps.synthetic.features import CLIP_SECONDS
from tan_apps.synthetic.long_videos import long_video

from conftest import SYNTHETIC_CONFIG, run_main

SPAN = {"median": 50.0, "longest": 80.0, "videos": 600}  # what the synthetic dataset's training videos last


def test_windows_cover_the_video_at_the_stride_and_the_last_ends_at_its_end():
    assert window_spans(100, 40, 20) == [(0, 40), (20, 60), (40, 80), (60, 100)]
    assert window_spans(90, 40, 20) == [(0, 40), (20, 60), (40, 80), (50, 90)]  # the last moved back, full length
    assert window_spans(30, 40, 20) == [(0, 30)]
    assert window_spans(41, 40, 40) == [(0, 40), (1, 41)]


def test_a_window_takes_every_row_it_overlaps_and_is_placed_at_their_seconds():
    # 100 rows over 50 s: 0.5 s a row
    assert window_rows(100, 50.0, 10.0, 20.0) == (20, 40, 10.0, 20.0)
    assert window_rows(100, 50.0, 10.2, 20.2) == (20, 41, 10.0, 20.5)
    assert window_rows(100, 50.0, 49.9, 50.0) == (99, 100, 49.5, 50.0)


def test_the_merge_is_one_nms_over_the_video_ties_to_the_earlier_window():
    # window 0 [0, 40): moments at 30-38 (0.9) and 5-10 (0.5); window 1 [20, 60): 31-39 (0.8, the same moment
    # seen again), 50-55 (0.9, a tie with window 0's best) and 21-24 (0.3)
    found = [[(torch.tensor([[30.0, 38.0], [5.0, 10.0]]), torch.tensor([0.9, 0.5]), 0),
              (torch.tensor([[31.0, 39.0], [50.0, 55.0], [21.0, 24.0]]), torch.tensor([0.8, 0.9, 0.3]), 1)]]
    moments, scores, filled, best = merge_windows(found, topk=4, nms_thresh=0.5)
    assert moments[0][filled[0]].tolist() == [[30.0, 38.0], [50.0, 55.0], [5.0, 10.0], [21.0, 24.0]]
    assert scores[0][filled[0]].tolist() == pytest.approx([0.9, 0.9, 0.5, 0.3])
    assert best.tolist() == [0]  # the tie at 0.9 goes to the earlier window's moment


def test_a_sentence_without_any_candidate_gets_no_moment():
    found = [[(torch.zeros(0, 2), torch.zeros(0), 0)]]
    moments, scores, filled, best = merge_windows(found, 3, 0.5)
    assert not filled.any() and best.tolist() == [-1]


def test_the_settings_come_from_the_config_or_the_trained_span_and_say_so():
    cfg = load_config(SYNTHETIC_CONFIG, [])
    settings, said = window_settings(cfg, SPAN)
    assert settings == WindowSettings(50.0, 25.0, 80.0, 8, 20)
    assert "median of the 600 training videos" in said
    settings, said = window_settings(load_config(SYNTHETIC_CONFIG, ["TEST.WINDOW.LENGTH", "30.0",
                                                                    "TEST.WINDOW.STRIDE", "10.0"]), SPAN)
    assert settings[:3] == (30.0, 10.0, 80.0) and "TEST.WINDOW.LENGTH" in said
    assert window_settings(cfg, None) == (None, "every video is scored whole: the checkpoint records no training "
                                                "span and TEST.WINDOW.LENGTH is 0; set TEST.WINDOW.LENGTH to window "
                                                "long videos")
    off, said = window_settings(load_config(SYNTHETIC_CONFIG, ["TEST.WINDOW.ENABLED", "False"]), SPAN)
    assert off is None and "ENABLED is off" in said


@pytest.mark.parametrize("key, value, expected", [
    ("TEST.WINDOW.LENGTH", "-1.0", "config key TEST.WINDOW.LENGTH: expected seconds >= 0 (0: as trained), got -1.0"),
    ("TEST.WINDOW.BATCH", "0", "config key TEST.WINDOW.BATCH: expected an integer >= 1, got 0"),
])
def test_window_values_that_cannot_work_are_refused_naming_the_key(key, value, expected):
    with pytest.raises(TanError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        load_config(SYNTHETIC_CONFIG, [key, value])
    with pytest.raises(TanError, match="TEST.WINDOW.STRIDE: 30.0 is longer than TEST.WINDOW.LENGTH 20.0"):
        load_config(SYNTHETIC_CONFIG, ["TEST.WINDOW.LENGTH", "20.0", "TEST.WINDOW.STRIDE", "30.0"])


@pytest.fixture(scope="module")
def untrained_checkpoint(synthetic_root, tmp_path_factory):
    """A randomly initialised synthetic 2D-TAN saved as a training run saves it, with a training span."""
    cfg = load_config(SYNTHETIC_CONFIG, ["DATASETS.ROOT", synthetic_root, "MODEL.DEVICE", "cpu"])
    torch.manual_seed(0)
    folder = str(tmp_path_factory.mktemp("untrained"))
    Checkpointer(build_model(cfg), None, None, folder, info=run_info(cfg, None, SPAN)).save("model_final")
    return os.path.join(folder, "model_final.pth"), synthetic_root


def test_a_long_video_is_grounded_in_windows_each_scored_as_a_video_of_its_own(untrained_checkpoint):
    path, root = untrained_checkpoint
    feats = np.random.default_rng(0).normal(size=(1200, 128)).astype(np.float32)  # 600 s at 0.5 s a row
    sentences = ["the person opens the door.", "a man cuts the bowl."]
    # one window a forward, as by hand below: the untrained model scores the last cell of many windows
    # alike, and a batch of windows may round those ties apart on some CPUs (oneDNN's batched kernels)
    windowed = tan.load_model(path, overrides=["DATASETS.ROOT", root, "TEST.WINDOW.BATCH", "1"])
    video = windowed.encode_video(feats, 600.0)
    assert video.map2d is None and len(video.windows.spans) == len(window_spans(600.0, 50.0, 25.0)) == 23
    answers = windowed.ground(video, sentences, topk=5)

    # the same by hand: every window a video of its own, its best 20 after NMS, placed and merged
    whole = tan.load_model(path, overrides=["DATASETS.ROOT", root, "TEST.WINDOW.ENABLED", "False"])
    found = [[] for _ in sentences]
    for index, span in enumerate(video.windows.spans):
        first, last, start, end = window_rows(len(feats), 600.0, *span)
        encoded = whole.encode_video(feats[first:last], end - start)
        assert encoded.windows is None
        for s, moments in enumerate(whole.ground(encoded, sentences, topk=20)):
            found[s].append((torch.tensor([[m.start + start, m.end + start] for m in moments]).reshape(-1, 2),
                             torch.tensor([m.score for m in moments]), index))
    expected, scores, filled, _ = merge_windows(found, 5, whole.cfg.TEST.NMS_THRESH)
    for s, moments in enumerate(answers):
        assert len(moments) == 5
        assert [t for m in moments for t in (m.start, m.end)] == pytest.approx(
            expected[s][filled[s]].flatten().tolist(), abs=1e-4)
        assert [m.score for m in moments] == pytest.approx(scores[s][filled[s]].tolist(), abs=1e-6)
        assert all(0 <= m.start < m.end <= 600.0 for m in moments)
    assert max(m.end for ms in answers for m in ms) > 100  # found across the video, not in its first minutes

    # answers(): the same moments, and the picture of the window of the best one, at the video's seconds
    for answer, moments in zip(windowed.answers(video, sentences, topk=5), answers):
        assert answer.moments == moments
        best = moments[0]
        assert answer.score_map.starts.min() <= best.start and best.end <= answer.score_map.ends.max() + 1e-4
        assert answer.score_map.ends.max() - answer.score_map.starts.min() == pytest.approx(50.0, abs=0.5)
    with pytest.raises(TanError, match="grounded by windows"):
        windowed.score_maps(video, sentences)


@pytest.mark.parametrize("config", ["2dtan_synthetic.yaml", "mmn_synthetic.yaml", "ms2dtan_synthetic.yaml",
                                    "tan_msra_synthetic.yaml"])
def test_every_built_in_model_grounds_a_long_video_in_windows(config, synthetic_root, tmp_path):
    """Each model as it takes its clips (resampled, or its own rows for MS-2D-TAN), its windows
    placed at the video's seconds: every moment lies in the video, and the best one in the window
    that answers() draws."""
    path = os.path.join(os.path.dirname(SYNTHETIC_CONFIG), config)
    cfg = load_config(path, ["DATASETS.ROOT", synthetic_root, "MODEL.DEVICE", "cpu"])
    torch.manual_seed(0)
    built = build_model(cfg)
    Checkpointer(built, None, None, str(tmp_path), info=run_info(cfg, None, SPAN)).save("model_final")
    model = tan.load_model(str(tmp_path / "model_final.pth"), overrides=["DATASETS.ROOT", synthetic_root])
    feats = np.random.default_rng(2).normal(size=(800, feature_size(cfg, built)[0])).astype(np.float32)
    video = model.encode_video(feats, 400.0)
    assert video.windows is not None and len(video.windows.spans) == 15
    answers = model.answers(video, ["the person opens the door.", "a man cuts the bowl."], topk=3)
    for answer in answers:
        assert 1 <= len(answer.moments) <= 3
        assert all(0 <= m.start < m.end <= 400.0 + 1e-3 for m in answer.moments)
        best = answer.moments[0]
        assert answer.score_map.starts.min() - 1e-3 <= best.start and best.end <= answer.score_map.ends.max() + 1e-3


def test_a_video_within_the_trained_span_is_scored_whole_as_before(untrained_checkpoint):
    path, root = untrained_checkpoint
    feats = np.random.default_rng(1).normal(size=(150, 128)).astype(np.float32)
    windowed = tan.load_model(path, overrides=["DATASETS.ROOT", root])
    whole = tan.load_model(path, overrides=["DATASETS.ROOT", root, "TEST.WINDOW.ENABLED", "False"])
    video = windowed.encode_video(feats, 75.0)  # shorter than the longest training video (80 s)
    assert video.windows is None
    assert windowed.ground(video, ["someone holds the cup."]) == whole.ground(whole.encode_video(feats, 75.0),
                                                                              ["someone holds the cup."])


def test_the_log_says_how_long_videos_are_grounded(untrained_checkpoint, caplog):
    path, root = untrained_checkpoint
    with caplog.at_level(logging.INFO, logger="tan"):
        tan.load_model(path, overrides=["DATASETS.ROOT", root])
    assert ("long videos: windows of 50 s every 25 s for videos longer than 80 s (length from the median of the "
            "600 training videos)") in caplog.text


def test_the_long_synthetic_video_holds_its_moment_once_at_the_dataset_rate():
    feats, duration, sentence, (start, end) = long_video(600, 10, seed=3)
    assert feats.shape == (1200, 128) and duration == 600.0 and end - start == 10.0
    assert feats.dtype == np.float32 and np.isfinite(feats).all()
    again = long_video(600, 10, seed=3)
    assert np.array_equal(again[0], feats) and again[2:] == (sentence, (start, end))
    assert start / CLIP_SECONDS == int(start / CLIP_SECONDS)


@pytest.fixture(scope="module")
def quick_start_model(synthetic_root, tmp_path_factory):
    """model_final.pth of the README's quick start (12 epochs on the synthetic dataset's 24-80 s videos),
    without its periodic evaluation and test."""
    out = str(tmp_path_factory.mktemp("quick_start"))
    proc = run_main("train_net", "--config-file", SYNTHETIC_CONFIG, "--skip-test", "DATASETS.ROOT", synthetic_root,
                    "OUTPUT_DIR", out, "MODEL.DEVICE", "cpu", "SOLVER.TEST_PERIOD", "0",
                    "SOLVER.CHECKPOINT_PERIOD", "12")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return os.path.join(out, "model_final.pth")


@pytest.mark.slow
def test_a_trained_model_finds_short_moments_of_long_videos_by_windows_and_not_whole(quick_start_model,
                                                                                      synthetic_root, tmp_path):
    """The point of windows: the quick start's model, trained on 24-80 s videos, asked through
    tan-predict about 10 s moments of 5-minute videos. Whole, the video's 16 cells are 19 s each."""
    stored = torch.load(quick_start_model, map_location="cpu", weights_only=False)
    assert stored["trained_span"]["videos"] == 600 and 24 <= stored["trained_span"]["median"] <= 80
    assert stored["trained_span"]["longest"] == 80.0

    hits = {"True": 0, "False": 0}
    for seed in range(20):
        feats, duration, sentence, moment = long_video(300, 10, seed)
        np.save(tmp_path / "video.npy", feats)
        for enabled in hits:
            proc = run_main("predict", "--ckpt", quick_start_model, "--features", str(tmp_path / "video.npy"),
                            "--duration", str(duration), "--query", sentence, "--json", "--topk", "1",
                            "DATASETS.ROOT", synthetic_root, "TEST.WINDOW.ENABLED", enabled)
            assert proc.returncode == 0, proc.stderr[-2000:]
            assert ("grounded in 11 windows" in proc.stderr) == (enabled == "True"), proc.stderr[-2000:]
            top = json.loads(proc.stdout)["queries"][0]["moments"][0]
            iou = float(temporal_iou(torch.tensor([[top["start"], top["end"]]]), torch.tensor([moment])))
            hits[enabled] += iou >= 0.5
    assert hits["False"] <= 1 and hits["True"] >= 4, hits


def test_the_benchmark_sets_windowed_beside_whole_per_video_length(tmp_path, capsys):
    import benchmark

    out = tmp_path / "long.json"
    benchmark.main(["--long-videos", "--device", "cpu", "--lengths", "120,600", "--window-length", "30",
                    "--json", str(out), "TEST.WINDOW.TOP_K", "3"])
    report = json.loads(out.read_text())
    assert report["lengths"] == [120, 600] and report["config"].endswith("2dtan_synthetic.yaml")
    assert report["top_k"] == 3
    for seconds, windows in ((120, 7), (600, 39)):  # window_spans(seconds, 30, 15)
        whole, windowed, top = (report["results"][f"{seconds}/{way}"] for way in ("whole", "windows", "relevance"))
        assert whole["windows"] == 0 and windowed["windows"] == windows == len(window_spans(seconds, 30, 15))
        assert top["windows"] == windows
        assert windowed["maps_per_query"] == windows and top["maps_per_query"] == 3  # the full model's maps
        assert whole["seconds_per_query"] > 0 and windowed["seconds_per_query"] > 0 and top["seconds_per_query"] > 0
        assert windowed["peak_growth_mb"] is not None and windowed["peak_growth_mb"] >= 0
    table = capsys.readouterr().out.splitlines()
    assert table[-2].startswith("| 2 min |") and table[-1].startswith("| 10 min |") and "| 39 |" in table[-1]
    assert table[-1].endswith("x |")  # the speed-up of the top windows over every window


# ---------------------------------------------------------------- MAD's evaluation: its windows, seconds, candidates

@pytest.mark.parametrize("rows", [129, 192, 193, 256, 257, 7026, 36000])
def test_windows_without_the_end_are_mad_s_starts_every_64_rows_below_rows_less_128(rows):
    settings = WindowSettings(25.6, 12.8, 25.6, 8, 0, cover_end=False, rows_per_second=5.0)
    spans = settings.spans(rows / 5.0 + 0.25, rows)  # the annotated duration plays no part on the rows' clock
    assert [int(s) for s, _ in spans] == list(range(0, rows - 128, 64))  # MAD: arange(0, rows - 128, 64)
    assert all(e - s == 128 for s, e in spans)
    covering = WindowSettings(25.6, 12.8, 25.6, 8, 20).spans(rows / 5.0, rows)
    assert covering[-1][1] == pytest.approx(rows / 5.0)  # tan's own: the last window ends at the video's end


def test_on_the_rows_clock_a_cell_lands_at_mad_s_float32_seconds():
    """MAD places cell k of its windows at k / 2.5 s in float32 (moments_indexes / relative_fps); tan's rows'
    clock gives whole rows, one division by the rate: the same bits, where r x duration / rows does not."""
    from tan.engine.long_videos.windows import WindowedVideo

    rows, duration = 7026, 1405.25
    video = WindowedVideo.of(np.zeros((rows, 4), np.float32), duration,
                             WindowSettings(25.6, 12.8, 25.6, 8, 0, cover_end=False, rows_per_second=5.0))
    cells = torch.arange(0, rows // 2 + 1, dtype=torch.int64)
    mad = cells / 2.5
    first, _, start, end = video.bounds(38)
    ours = video.seconds(torch.arange(0, 65, dtype=torch.float32) * (end - start) / 64 + start)
    assert torch.equal(ours, mad[first // 2:first // 2 + 65])
    assert (first, start, end) == (38 * 64, 2432.0, 2560.0)
    seconds_clock = torch.arange(0, 65, dtype=torch.float32) * (duration / rows * 128) / 64 + first * duration / rows
    assert not torch.equal(seconds_clock.float(), mad[first // 2:first // 2 + 65])


def test_holding_a_sentence_s_best_candidates_decides_as_every_candidate_or_grounds_it_again():
    """TEST.WINDOW.CANDIDATES 0 gives every cell of every window to one NMS; past HELD_CANDIDATES a
    sentence keeps its best only, and the NMS over them is the NMS over all, or the sentence is redone."""
    from tan.engine.long_videos import windows

    rng = np.random.default_rng(0)
    parts = []
    for w in range(40):
        starts = torch.from_numpy(rng.uniform(0, 1000, 300).astype(np.float32))
        moments = torch.stack([starts, starts + torch.from_numpy(rng.uniform(1, 20, 300).astype(np.float32))], 1)
        scores = torch.from_numpy(rng.choice([0.25, 0.5, 0.75], 300).astype(np.float32) +
                                  rng.integers(0, 50, 300).astype(np.float32) / 1000)  # many ties
        parts.append((moments, scores, w))
    every = merge_windows([parts], 100, 0.3)
    held = windows.Found(held=500)
    for m, c, w in parts:
        held.add(m, c, w)
    assert held.count <= 1000 and held.floor is not None
    pruned = merge_windows({0: held}, 100, 0.3)
    assert held.decided(pruned[1][0], pruned[2][0])
    for a, b in zip(every, pruned):
        assert torch.equal(a, b)
    few = windows.Found(held=50)  # too few held: the NMS reaches below the floor, which says so
    for m, c, w in parts:
        few.add(m, c, w)
    assert not few.decided(*merge_windows({0: few}, 100, 0.3)[1:3])


@pytest.mark.parametrize("key, value, message", [
    ("TEST.WINDOW.CANDIDATES", "-1", "expected an integer >= 0 (0: every candidate of every window)"),
    ("TEST.WINDOW.ROWS_PER_SECOND", "-5.0", "expected feature rows a second > 0, or 0"),
])
def test_mad_s_evaluation_keys_refuse_what_they_cannot_take(key, value, message):
    with pytest.raises(TanError) as refused:
        load_config(SYNTHETIC_CONFIG, [key, value])
    assert str(refused.value).startswith(f"config key {key}: {message}")
    with pytest.raises(TanError, match=r"TEST.WINDOW.COVER_END expects True or False \(default True\), got '1'"):
        load_config(SYNTHETIC_CONFIG, ["TEST.WINDOW.COVER_END", "1"])


def test_a_sentence_whose_nms_reaches_below_the_held_candidates_is_grounded_again_to_the_same_moments(
        untrained_checkpoint, monkeypatch, caplog):
    """Every cell of every window (TEST.WINDOW.CANDIDATES 0), with so few candidates held that the NMS
    reaches below them: the sentences are grounded again holding more, to what holding all of them gives."""
    from tan.engine.long_videos import windows

    path, root = untrained_checkpoint
    feats = np.random.default_rng(1).normal(size=(1200, 128)).astype(np.float32)
    sentences = ["the person opens the door.", "a man cuts the bowl."]
    model = tan.load_model(path, overrides=["DATASETS.ROOT", root, "TEST.WINDOW.CANDIDATES", "0",
                                            "TEST.WINDOW.BATCH", "1"])
    video = model.encode_video(feats, 600.0)
    every = model.ground(video, sentences, topk=100)
    monkeypatch.setattr(windows, "HELD_CANDIDATES", 20)
    with caplog.at_level(logging.INFO, logger="tan"):
        again = model.ground(video, sentences, topk=100)
    assert "2 sentence(s) grounded again holding the best 160 of their candidates" in caplog.text
    assert [[(m.start, m.end, m.score) for m in a] for a in again] == [[(m.start, m.end, m.score) for m in a]
                                                                         for a in every]
