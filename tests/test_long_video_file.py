"""The long synthetic video file (tan-synthetic-videos --long-video): one moment to ask about among
others of other shapes on the synthetic videos' stage, rendered and encoded a frame at a time."""
import json
import os

import numpy as np
import pytest

from tan_apps.synthetic.videos import COLOURS, FPS, long_video

from conftest import run_main

av = pytest.importorskip("av")


@pytest.mark.parametrize("seed", range(4))
def test_the_asked_moment_is_the_only_one_of_its_colour_and_shape_and_has_the_stage_to_itself(seed):
    duration, moments, actors, sentence, moment = long_video(3600.0, 10.0, seed)
    assert moments[0] == moment and moment[1] - moment[0] == pytest.approx(10.0) and 0 < moment[0] < moment[1] < duration
    colour, shape, direction = actors[0]
    assert sentence.count(colour) == 1 and shape in sentence and direction in sentence
    assert len(moments) > 80  # one about every 30 s
    spans = sorted(moments[1:])
    assert all(a[1] < b[0] for a, b in zip(spans, spans[1:]))  # no two at once
    for (start, end), (c, s, _) in zip(moments[1:], actors[1:]):
        assert (c, s) != (colour, shape) and 2.0 <= end - start <= 7.0 and end <= duration
        assert end <= moment[0] - 1.0 or start >= moment[1] + 1.0
    assert any(c == colour for c, _, _ in actors[1:]) and any(s == shape for _, s, _ in actors[1:])
    assert long_video(3600.0, 10.0, seed) == (duration, moments, actors, sentence, moment)  # reproducible


def _frames(path):
    with av.open(path) as container:
        return [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]


def test_the_tool_writes_the_video_and_says_what_to_ask(tmp_path):
    proc = run_main("synthetic_videos", "--output", str(tmp_path), "--long-video", "90", "--seed", "3")
    assert proc.returncode == 0, proc.stderr[-3000:]
    written = json.loads(proc.stdout.strip().splitlines()[-1])
    assert written["video"] == os.path.join(str(tmp_path), "videos", "synvid_long_90s_3.mp4")
    assert written["duration"] == 90.0 and written["moment"][1] - written["moment"][0] == pytest.approx(10.0)
    frames = _frames(written["video"])
    assert len(frames) == 90 * FPS
    _, moments, actors, sentence, _ = long_video(90.0, 10.0, 3)
    assert sentence == written["sentence"]
    colour = np.asarray(COLOURS[actors[0][0]], dtype=np.int16)

    def coloured(time):  # pixels near the asked shape's colour in the frame at ``time``
        frame = frames[int(time * FPS)].astype(np.int16)
        return int((np.abs(frame - colour).max(axis=2) < 40).sum())

    start, end = written["moment"]
    assert coloured((start + end) / 2) > 200  # the shape covers about a quarter of the frame
    busy = [(s - 0.5, e + 0.5) for s, e in moments]
    quiet = next(t for t in np.arange(0.5, 90, 0.5) if not any(s <= t <= e for s, e in busy))
    assert coloured(quiet) < 20  # an empty stage
    bad = run_main("synthetic_videos", "--output", str(tmp_path), "--long-video", "15")
    assert bad.returncode == 2 and "at most half the video's length" in bad.stdout + bad.stderr
    endless = run_main("synthetic_videos", "--output", str(tmp_path), "--long-video", "inf")
    assert endless.returncode == 2 and "--long-video inf" in endless.stdout + endless.stderr
    negative = run_main("synthetic_videos", "--output", str(tmp_path), "--long-video", "90", "--seed", "-1")
    assert negative.returncode == 2 and "--seed -1: expected a number of 0 or more" in negative.stdout + negative.stderr
    assert sorted(os.listdir(tmp_path / "videos")) == ["synvid_long_90s_3.mp4"]  # nothing else written


def test_the_long_training_videos_ask_each_moment_once_and_no_two_alike(tmp_path, monkeypatch):
    """tan-synthetic-videos --long: videos of minutes with a moment about every 25 s, each moment asked
    once and described by its sentence alone (no two of a video share colour and shape)."""
    from tan_apps.synthetic import videos

    monkeypatch.setattr(videos, "LONG_SECONDS", (60.0, 90.0))  # minutes of video take seconds to encode
    counts = videos.generate(str(tmp_path), seed=5, splits={"train": 2, "test": 1}, long=True)
    records = {split: [json.loads(line) for line in open(tmp_path / "data" / f"{split}.jsonl")]
               for split in ("train", "test")}
    assert counts == {split: len(r) for split, r in records.items()}
    assert sorted(os.listdir(tmp_path / "videos")) == [
        "synvid_long_test_0000.mp4", "synvid_long_train_0000.mp4", "synvid_long_train_0001.mp4"]
    catalog = (tmp_path / "catalog.yaml").read_text()
    assert "synthetic_long_videos_train:" in catalog and "synthetic_long_videos_test:" in catalog
    for split, lines in records.items():
        by_video = {}
        for r in lines:
            by_video.setdefault(r["vid"], []).append(r)
        for video, queries in by_video.items():
            duration = queries[0]["duration"]
            assert 60.0 <= duration <= 90.0
            assert len(queries) >= duration / 25.0 / 1.5 - 1  # about one every 25 s
            spans = sorted(tuple(q["relevant_windows"][0]) for q in queries)
            assert all(a[1] + 1.0 <= b[0] + 1e-6 for a, b in zip(spans, spans[1:]))  # a second of stage between
            assert all(2.0 <= e - s <= 12.0 and e <= duration - 1.0 for s, e in spans)
            described = [tuple(w for w in q["query"].split() if w in COLOURS or w.strip(".") in videos.SHAPES)
                         for q in queries]
            assert len(set(described)) == len(described)  # colour and shape name one moment of the video
            frames = _frames(str(tmp_path / "videos" / f"{video}.mp4"))
            assert len(frames) == int(round(duration * FPS))
    again = tmp_path / "again"
    videos.generate(str(again), seed=5, splits={"train": 2, "test": 1}, long=True)
    assert (again / "data" / "train.jsonl").read_text() == (tmp_path / "data" / "train.jsonl").read_text()


def test_the_tool_writes_long_training_videos_or_refuses_both_kinds_at_once(tmp_path):
    both = run_main("synthetic_videos", "--output", str(tmp_path), "--long", "--long-video", "90")
    assert both.returncode == 2 and "give one of them" in both.stdout + both.stderr
    assert not os.path.exists(tmp_path / "videos")
    proc = run_main("synthetic_videos", "--output", str(tmp_path), "--long", "--train-videos", "1", "--test-videos", "1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(os.listdir(tmp_path / "videos")) == ["synvid_long_test_0000.mp4", "synvid_long_train_0000.mp4"]
    assert "synthetic_long_videos_test:" in (tmp_path / "catalog.yaml").read_text()
