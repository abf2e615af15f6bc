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
