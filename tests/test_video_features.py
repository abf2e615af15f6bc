"""Video files in: decoding, the feature backbones (tiny random ones built from
their configs), tan-extract-features over folders with bad videos, resuming
after a kill, extractor records, and prediction from a video file with the
recorded extractors."""
import json
import logging
import os
import subprocess
import sys
import time
from fractions import Fraction

import numpy as np
import pytest

av = pytest.importorskip("av")
pytest.importorskip("transformers")

from tan.data.features.provenance import read_extractor  # noqa: E402
from tan.errors import TanError  # noqa: E402
from tan.video.backbones import text_backbone, video_backbone  # noqa: E402
from tan.video.decode import (CODEC, CORRUPT, EMPTY, NO_FRAMES, NO_VIDEO, TRUNCATED, check_sampling,  # noqa: E402
                              clip_chunks)
from tan.video.extract import backbone_sampling, extract_videos, list_videos  # noqa: E402
from tan.video.queries import extract_queries, read_query_file  # noqa: E402
from tan_apps.synthetic.videos import write_video  # noqa: E402

from conftest import CLIP_SECONDS, REPO, TAN_VIDEOS, audio_only, run_main  # noqa: E402

MMN_VIDEOS = os.path.join(REPO, "configs", "video", "mmn_synthetic_videos.yaml")


def extract_tool(*args, timeout=600):
    return run_main("extract_features", *args, timeout=timeout)


def solid_video(path, colours, fps=10, size=48, codec="libx264"):
    """One frame per entry of ``colours`` (grey levels), at ``fps``."""
    frames = np.stack([np.full((size, size, 3), c, np.uint8) for c in colours])
    write_video(path, frames, fps)


def variable_rate_video(path, times_ms, size=48):
    """Frames at the given times (ms), frame i of grey level 30 i."""
    with av.open(path, "w") as container:
        stream = container.add_stream("libx264", rate=30)
        stream.width = stream.height = size
        stream.pix_fmt = "yuv420p"
        stream.time_base = stream.codec_context.time_base = Fraction(1, 1000)
        for i, t in enumerate(times_ms):
            frame = av.VideoFrame.from_ndarray(np.full((size, size, 3), 30 * i, np.uint8), format="rgb24")
            frame.pts, frame.time_base = t, Fraction(1, 1000)
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def in_container(path, fmt, count=100, fps=10, size=48):
    """``count`` frames of changing grey in an MKV or MPEG-TS file."""
    with av.open(path, "w", format=fmt) as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width = stream.height = size
        stream.pix_fmt = "yuv420p"
        for i in range(count):
            frame = av.VideoFrame.from_ndarray(np.full((size, size, 3), (i * 5) % 250, np.uint8), format="rgb24")
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def test_sampling_is_by_time_in_a_variable_frame_rate_video(tmp_path):
    path = str(tmp_path / "vfr.mp4")
    times = [0, 100, 150, 400, 1000, 1050, 1600, 2300]
    variable_rate_video(path, times)
    chunks = list(clip_chunks(path, check_sampling(10, CLIP_SECONDS, 16), 2))
    frames = np.concatenate([c.frames for c in chunks]).reshape(-1, 16, 16, 3)
    grey = frames[:, 8, 8, 0].astype(int)
    for k, level in enumerate(grey):
        at = (k + 0.5) * 100  # ms: sample k shows the last frame stamped at or before it
        shown = max(i for i, t in enumerate(times) if t <= at) if at < chunks[-1].end * 1000 else len(times) - 1
        assert abs(level - 30 * shown) <= 3, (k, level, shown)
    assert len(frames) % 5 == 0  # whole clips of 5 samples
    assert len(frames) // 5 == int(np.ceil(chunks[-1].end / CLIP_SECONDS - 1e-9))


def test_times_count_from_the_first_frame_of_an_mpeg_ts_file(tmp_path):
    path = str(tmp_path / "clock.ts")
    in_container(path, "mpegts")  # MPEG-TS starts its clock at 0.2 s (or anywhere)
    assert av.open(path).streams.video[0].start_time > 0
    chunks = list(clip_chunks(path, check_sampling(2, CLIP_SECONDS, 16), 4))
    assert chunks[-1].end == pytest.approx(10.0) and sum(len(c.frames) for c in chunks) == 20


def cut_download(path, seconds=6, fps=30, size=(64, 48)):
    """A video of ``seconds`` at ``path`` as a download stopped half-way leaves it: an MP4 with its index
    at the front (``-movflags +faststart``, as files made for streaming are), so that FFmpeg opens it,
    of which the first half of the bytes is there. Its frames are noise, whose bytes spread evenly over
    time. Returns the bytes of the whole file."""
    rng = np.random.default_rng(0)
    with av.open(path, "w", format="mp4", options={"movflags": "faststart"}) as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height = size
        stream.pix_fmt = "yuv420p"
        for _ in range(seconds * fps):
            noise = rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(noise, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    whole = open(path, "rb").read()
    open(path, "wb").write(whole[:len(whole) // 2])
    return whole


# What every tool says of the file cut_download leaves (the first 2.9 s of its frames decode).
CUT_DOWNLOAD = ("it decodes to 2.9 s of the 6.0 s its header gives; the rest is missing, as in a partial download: "
                "replace it with the whole file and run again")


def test_a_truncated_file_whose_header_gives_its_length_is_reported(tmp_path):
    whole, cut = str(tmp_path / "whole.mkv"), str(tmp_path / "cut.mkv")
    in_container(whole, "matroska")
    data = open(whole, "rb").read()
    open(cut, "wb").write(data[:len(data) // 2])
    assert list(clip_chunks(whole, check_sampling(2, CLIP_SECONDS, 16), 4))[-1].end == pytest.approx(10.0)
    from tan.video.decode import VideoError

    with pytest.raises(VideoError) as caught:
        list(clip_chunks(cut, check_sampling(2, CLIP_SECONDS, 16), 4))
    assert caught.value.reason == TRUNCATED and "of the 10.0 s its header gives" in caught.value.detail
    download = str(tmp_path / "download.mp4")
    cut_download(download)
    with pytest.raises(VideoError) as caught:
        list(clip_chunks(download, check_sampling(2, CLIP_SECONDS, 16), 4))
    assert caught.value.reason == TRUNCATED and caught.value.detail == CUT_DOWNLOAD


def test_a_rerun_extracts_again_a_video_whose_file_changed_and_keeps_the_others(tiny_models, tmp_path, caplog):
    """Each .npz records its video file's size and modification time: a cut download refused on the
    first run is extracted once the whole file is there, a file changed since is extracted again, and
    a file written before files recorded their source is kept as it is."""
    caplog.set_level(logging.INFO, logger="tan")
    videos = tmp_path / "videos"
    videos.mkdir()
    solid_video(str(videos / "a.mp4"), [100] * 10)
    whole = cut_download(str(videos / "cut.mp4"))
    model = video_backbone("clip")(tiny_models["clip"], "cpu")
    out = tmp_path / "out"

    def extract():
        return extract_videos(list_videos([str(videos)]), model, backbone_sampling(model, CLIP_SECONDS), str(out))

    first = extract()
    assert first.written == ["a"] and first.failed == {"cut": (TRUNCATED, CUT_DOWNLOAD)}
    assert f"    {videos / 'cut.mp4'} ({CUT_DOWNLOAD})" in first.text().splitlines()
    assert sorted(os.listdir(out)) == ["a.npz", "extractor.json"]  # nothing of the cut file
    stored = np.load(out / "a.npz")
    info = os.stat(videos / "a.mp4")
    assert stored.files == ["features", "duration", "source_size", "source_mtime_ns"]
    assert int(stored["source_size"]) == info.st_size and int(stored["source_mtime_ns"]) == info.st_mtime_ns
    a_bytes = (out / "a.npz").read_bytes()
    (videos / "cut.mp4").write_bytes(whole)  # the download finished
    second = extract()
    assert second.written == ["cut"] and second.skipped == ["a"] and not second.failed
    assert float(np.load(out / "cut.npz")["duration"]) == pytest.approx(6.0)
    assert (out / "a.npz").read_bytes() == a_bytes and "changed since" not in caplog.text
    os.utime(videos / "a.mp4", ns=(info.st_atime_ns, info.st_mtime_ns + 1))  # same size, written again since
    third = extract()
    assert third.written == ["a"] and third.skipped == ["cut"]
    assert ("1 video files changed since their features were written (or their features cannot be read); "
            "extracting them again: a") in caplog.text
    assert int(np.load(out / "a.npz")["source_mtime_ns"]) == info.st_mtime_ns + 1
    with open(out / "a.npz", "wb") as f:  # as an older version wrote it: no record of its source
        np.savez(f, features=np.zeros((2, 32), np.float32), duration=1.0)
    os.utime(videos / "a.mp4", ns=(info.st_atime_ns, info.st_mtime_ns + 2))
    assert extract().skipped == ["a", "cut"]
    (out / "cut.npz").write_bytes(b"PK\x03\x04 damaged")  # cannot be read: made again
    assert extract().written == ["cut"]


def test_a_video_shorter_than_a_clip_gives_one_clip(tmp_path):
    path = str(tmp_path / "short.mp4")
    solid_video(path, [200], fps=25)  # one frame, 0.04 s
    chunks = list(clip_chunks(path, check_sampling(8, CLIP_SECONDS, 16), 4))
    assert sum(len(c.frames) for c in chunks) == 1 and chunks[-1].end == pytest.approx(0.04)
    assert chunks[-1].frames.shape == (1, 4, 16, 16, 3) and (abs(chunks[-1].frames.astype(int) - 200) <= 3).all()


@pytest.mark.parametrize("backbone,dim,per_clip", [("clip", 32, 1), ("video_transformer", 32, 4)])
def test_each_video_backbone_gives_one_row_per_clip_and_records_itself(tiny_models, tmp_path, backbone, dim,
                                                                       per_clip):
    videos = tmp_path / "videos"
    videos.mkdir()
    solid_video(str(videos / "a.mp4"), list(range(0, 250, 10)), fps=10)  # 2.5 s: 5 clips
    solid_video(str(videos / "b.mp4"), [90] * 13, fps=10)  # 1.3 s: 3 clips
    model = video_backbone(backbone)(tiny_models[backbone], "cpu")
    sampling = backbone_sampling(model, CLIP_SECONDS)
    out = str(tmp_path / "out")
    summary = extract_videos(list_videos([str(videos)]), model, sampling, out)
    assert sorted(summary.written) == ["a", "b"] and summary.clips == 8
    a, b = np.load(os.path.join(out, "a.npz")), np.load(os.path.join(out, "b.npz"))
    assert a["features"].shape == (5, dim) and b["features"].shape == (3, dim)
    assert a["features"].dtype == np.float32 and float(a["duration"]) == pytest.approx(2.5)
    assert np.isfinite(a["features"]).all() and not np.allclose(a["features"][0], a["features"][-1])
    assert np.allclose(b["features"], b["features"][0], atol=1e-4)  # one colour throughout
    record = read_extractor(out)
    assert record["backbone"] == backbone and record["frames_per_clip"] == per_clip and record["dim"] == dim
    assert record["clip_seconds"] == CLIP_SECONDS and record["resolution"] == 32
    assert record["model"] == os.path.abspath(tiny_models[backbone]) and record["weights"].startswith("sha256:")
    assert record["decoder"].startswith("PyAV ")


def test_the_text_backbone_writes_token_features_and_the_sentence_vector(tiny_models, tmp_path):
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"qid": 7, "query": "the red circle moves left."}\n{"qid": "s1_2", "query": "a cup"}\n')
    model = text_backbone("clip")(tiny_models["clip"], "cpu")
    out = str(tmp_path / "text")
    summary = extract_queries(read_query_file(str(queries)), model, out)
    assert sorted(summary.written) == ["7", "s1_2"]
    first = np.load(os.path.join(out, "qid7.npz"))
    # character tokens between the start and end tokens: 26 characters and spaces -> 20 letters and "." + 2
    assert first["last_hidden_state"].shape == (len("theredcirclemovesleft.") + 2, 32)
    assert first["pooler_output"].shape == (32,)
    assert np.load(os.path.join(out, "qids1_2.npz"))["last_hidden_state"].shape == (len("acup") + 2, 32)
    assert read_extractor(out)["kind"] == "text"
    assert str(first["query"]) == "the red circle moves left."  # what a rerun compares
    # a rerun keeps the queries whose sentence is the same, and encodes again one whose sentence changed
    queries.write_text('{"qid": 7, "query": "the red circle moves right."}\n{"qid": "s1_2", "query": "a cup"}\n')
    again = extract_queries(read_query_file(str(queries)), model, out)
    assert again.written == ["7"] and again.skipped == ["s1_2"]
    assert str(np.load(os.path.join(out, "qid7.npz"))["query"]) == "the red circle moves right."
    from tan.video.backbones import tiny_writer

    # a plug-in's backbone stays registered in this process once a test has imported it (test_backbone_plugins.py)
    with pytest.raises(TanError, match="unknown backbone 'nope'; registered: clip, .*slowfast, video_transformer"):
        tiny_writer("nope")


@pytest.mark.slow
def test_a_folder_of_bad_videos_reports_each_reason_and_writes_the_good_ones(tiny_models, tmp_path):
    videos = tmp_path / "videos"
    videos.mkdir()
    solid_video(str(videos / "good.mp4"), [100] * 12)
    variable_rate_video(str(videos / "vfr.mp4"), [0, 100, 150, 400, 1000])
    solid_video(str(videos / "short.mp4"), [50])
    (videos / "empty.mp4").write_bytes(b"")
    (videos / "corrupt.mp4").write_bytes(os.urandom(4096))
    audio_only(str(videos / "audio.mp4"))
    data = (videos / "good.mp4").read_bytes()
    (videos / "codec.mp4").write_bytes(data.replace(b"avc1", b"zzzz"))
    blank = bytearray(data)
    start, end = blank.index(b"mdat") + 4, blank.index(b"moov") - 4
    blank[start:end] = bytes(end - start)
    (videos / "blank.mp4").write_bytes(bytes(blank))
    in_container(str(tmp_path / "whole.mkv"), "matroska")
    whole = (tmp_path / "whole.mkv").read_bytes()
    (videos / "partial.mkv").write_bytes(whole[:len(whole) // 2])
    (videos / "notes.txt").write_text("not a video")  # not a video extension: not listed
    out = tmp_path / "out"
    proc = extract_tool("--videos", str(videos), "--backbone", "clip", "--model", tiny_models["clip"],
                        "--output", str(out), "--clip-seconds", str(CLIP_SECONDS), "--workers", "2")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "3 videos written" in proc.stdout and "6 failed" in proc.stdout
    for reason, file in ((EMPTY, "empty.mp4"), (CORRUPT, "corrupt.mp4"), (NO_VIDEO, "audio.mp4"),
                         (CODEC, "codec.mp4"), (NO_FRAMES, "blank.mp4"), (TRUNCATED, "partial.mkv")):
        assert f"  {reason}: 1\n    {videos / file}" in proc.stdout, proc.stdout
    assert sorted(os.listdir(out)) == ["extractor.json", "good.npz", "short.npz", "vfr.npz"]
    assert np.load(out / "short.npz")["features"].shape == (1, 32)
    (videos / "partial.mkv").write_bytes(whole)  # the partial download replaced by the whole file
    rerun = extract_tool("--videos", str(videos), "--backbone", "clip", "--model", tiny_models["clip"],
                         "--output", str(out), "--clip-seconds", str(CLIP_SECONDS))
    assert rerun.returncode == 1 and "1 videos written" in rerun.stdout and "3 already there" in rerun.stdout
    assert "5 failed" in rerun.stdout and TRUNCATED not in rerun.stdout
    assert np.load(out / "partial.npz")["features"].shape == (20, 32)  # all 10 s of it


def test_a_stream_that_decodes_to_no_frame_is_reported(tmp_path):
    path = str(tmp_path / "blank.mp4")
    solid_video(path, [100] * 10)
    data = bytearray(open(path, "rb").read())
    start, end = data.index(b"mdat") + 4, data.index(b"moov") - 4  # every coded frame zeroed; the index intact
    data[start:end] = bytes(end - start)
    open(path, "wb").write(bytes(data))
    from tan.video.decode import VideoError

    with pytest.raises(VideoError) as caught:
        list(clip_chunks(path, check_sampling(2, CLIP_SECONDS, 16), 4))
    assert caught.value.reason == NO_FRAMES


def test_a_folder_of_features_made_otherwise_is_refused_and_a_qid_names_one_sentence(tiny_models, tmp_path):
    videos = tmp_path / "videos"
    videos.mkdir()
    solid_video(str(videos / "a.mp4"), [100] * 10)
    out = tmp_path / "out"
    out.mkdir()
    np.save(out / "x.npy", np.zeros((2, 2)))
    (out / "a.npz").write_bytes(b"made elsewhere")
    model = video_backbone("clip")(tiny_models["clip"], "cpu")
    with pytest.raises(TanError, match="holds .npz files but no extractor record"):
        extract_videos(list_videos([str(videos)]), model, backbone_sampling(model, CLIP_SECONDS), str(out))
    assert (out / "a.npz").read_bytes() == b"made elsewhere" and not (out / "extractor.json").exists()
    extract_videos(list_videos([str(videos)]), model, backbone_sampling(model, CLIP_SECONDS), str(out),
                   overwrite=True)
    assert np.load(out / "a.npz")["features"].shape == (2, 32)
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"qid": 1, "query": "a cup"}\n{"qid": 1, "query": "a cup"}\n{"qid": 1, "query": "a pan"}\n')
    with pytest.raises(TanError, match=r"q.jsonl:3: qid 1 was given the sentence 'a cup' before"):
        read_query_file(str(queries))


def test_a_folder_made_by_another_extractor_is_refused(tiny_models, tmp_path):
    videos = tmp_path / "videos"
    videos.mkdir()
    solid_video(str(videos / "a.mp4"), [100] * 10)
    out = str(tmp_path / "out")
    model = video_backbone("clip")(tiny_models["clip"], "cpu")
    extract_videos(list_videos([str(videos)]), model, backbone_sampling(model, CLIP_SECONDS), out)
    before = os.stat(os.path.join(out, "a.npz")).st_mtime_ns
    with pytest.raises(TanError, match="made by another extractor.*clip_seconds 0.5 -> 1.0"):
        extract_videos(list_videos([str(videos)]), model, backbone_sampling(model, 1.0), out, overwrite=True)
    assert os.stat(os.path.join(out, "a.npz")).st_mtime_ns == before


@pytest.mark.slow
def test_the_extractor_refuses_a_cut_download_in_one_line_and_extracts_it_once_it_is_whole(tiny_models, tmp_path):
    videos = tmp_path / "videos"
    videos.mkdir()
    whole = cut_download(str(videos / "cut.mp4"))
    solid_video(str(videos / "good.mp4"), [100] * 10)
    out = tmp_path / "out"
    args = ["--videos", str(videos), "--backbone", "clip", "--model", tiny_models["clip"], "--output", str(out),
            "--clip-seconds", str(CLIP_SECONDS)]
    proc = extract_tool(*args)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.splitlines() == [f"1 videos written (2 clips), 0 already there, 1 failed, in {out}",
                                        f"  {TRUNCATED}: 1", f"    {videos / 'cut.mp4'} ({CUT_DOWNLOAD})"]
    assert sorted(os.listdir(out)) == ["extractor.json", "good.npz"]
    good = (out / "good.npz").read_bytes()
    (videos / "cut.mp4").write_bytes(whole)
    rerun = extract_tool(*args)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert rerun.stdout.splitlines() == [f"1 videos written (12 clips), 1 already there, 0 failed, in {out}"]
    assert (out / "good.npz").read_bytes() == good  # not done twice
    assert np.load(out / "cut.npz")["features"].shape == (12, 32)


@pytest.mark.slow
def test_a_run_killed_in_the_middle_of_a_folder_leaves_no_partial_file_and_the_rerun_does_the_rest_once(
        tiny_models, tmp_path):
    videos = tmp_path / "videos"
    videos.mkdir()
    for i in range(24):
        solid_video(str(videos / f"v{i:02d}.mp4"), [(i * 10) % 250] * 30)
    out = tmp_path / "out"
    args = [sys.executable, os.path.join(REPO, "tools", "extract_features.py"), "--videos", str(videos),
            "--backbone", "video_transformer", "--model", tiny_models["video_transformer"], "--output", str(out),
            "--clip-seconds", str(CLIP_SECONDS), "--batch-clips", "1"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if len([n for n in os.listdir(out) if n.endswith(".npz")] if out.exists() else []) >= 3:
            break
        time.sleep(0.05)
    proc.kill()
    proc.communicate()
    finished = {n: os.stat(out / n).st_mtime_ns for n in os.listdir(out) if n.endswith(".npz")}
    assert 3 <= len(finished) < 24, "the run ended before it could be killed in the middle"
    for name in finished:  # every file there is complete
        assert np.load(out / name)["features"].shape == (6, 32)
    rerun = extract_tool("--videos", str(videos), "--backbone", "video_transformer", "--model",
                         tiny_models["video_transformer"], "--output", str(out), "--clip-seconds", str(CLIP_SECONDS))
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert f"{24 - len(finished)} videos written" in rerun.stdout and f"{len(finished)} already there" in rerun.stdout
    assert sorted(os.listdir(out)) == ["extractor.json"] + [f"v{i:02d}.npz" for i in range(24)]  # no temporaries
    assert {n: os.stat(out / n).st_mtime_ns for n in finished} == finished  # not done twice


@pytest.mark.slow
def test_datasets_of_one_run_with_features_of_different_extractors_are_warned_about(video_dataset, tmp_path):
    from tan.config import load_config
    from tan.data import RunData

    other = tmp_path / "clip_other"
    os.makedirs(other)
    test_videos = {json.loads(line)["vid"] for line in open(os.path.join(video_dataset, "data", "test.jsonl"))}
    for video in test_videos:
        os.link(os.path.join(video_dataset, "features", "clip", f"{video}.npz"), other / f"{video}.npz")
    record = read_extractor(os.path.join(video_dataset, "features", "clip"))
    (other / "extractor.json").write_text(json.dumps({**record, "clip_seconds": 1.0, "frame_rate": 1.0}))
    catalog = tmp_path / "catalog.json"
    entries = {"v_train": {"annotations": os.path.join(video_dataset, "data", "train.jsonl"), "format": "jsonl",
                           "features": [os.path.join(video_dataset, "features", s) for s in
                                        ("clip", "video_transformer")],
                           "text_features": os.path.join(video_dataset, "features", "clip_text")}}
    entries["v_test"] = {**entries["v_train"], "annotations": os.path.join(video_dataset, "data", "test.jsonl"),
                         "features": [str(other), entries["v_train"]["features"][1]]}
    catalog.write_text(json.dumps(entries))
    cfg = load_config(TAN_VIDEOS, ["DATASETS.CATALOG", str(catalog), "DATASETS.TRAIN", "('v_train',)",
                                   "DATASETS.TEST", "('v_test',)"])
    data = RunData(cfg)
    warnings = data.extractor_warnings()
    assert len(warnings) == 1 and "'v_train' and 'v_test' have feature stream 1" in warnings[0]
    assert "clip_seconds 0.5 -> 1.0" in warnings[0]
    assert data.extractors()["features"][0] == record
    from tan.data.check import check_run, format_report

    text, problems = format_report(*check_run(data))
    assert not problems and text.count("made by clip (") == 2 and text.count("made by video_transformer (") == 2
    assert "0.5 s clips" in text and "1 s clips" in text


def metric(out, folder, dataset="synthetic_videos_test", name="R@1,IoU@0.5"):
    with open(os.path.join(out, "inference", folder, dataset, "metrics.json")) as f:
        return json.load(f)[name]


@pytest.mark.slow
def test_the_checkpoint_records_the_extractors_and_predicts_from_a_video_file_as_from_its_features(
        video_dataset, trained_tan):
    import torch

    checkpoint = os.path.join(trained_tan, "model_final.pth")
    stored = torch.load(checkpoint, map_location="cpu", weights_only=False)["extractors"]
    assert stored["features"] == [read_extractor(os.path.join(video_dataset, "features", s))
                                  for s in ("clip", "video_transformer")]
    assert stored["text_features"] == read_extractor(os.path.join(video_dataset, "features", "clip_text"))
    record = json.loads(open(os.path.join(video_dataset, "data", "test.jsonl")).readline())
    video_file = os.path.join(video_dataset, "videos", f"{record['vid']}.mp4")
    from_file = run_main("predict", "--ckpt", checkpoint, "--video-file", video_file, "--query", record["query"],
                         "--json")
    assert from_file.returncode == 0, from_file.stderr[-3000:]
    from_features = run_main("predict", "--ckpt", checkpoint, "--video", record["vid"], "--duration",
                             str(record["duration"]), "--query", record["query"], "--json",
                             "DATASETS.ROOT", video_dataset)
    assert from_features.returncode == 0, from_features.stderr[-3000:]
    a, b = json.loads(from_file.stdout), json.loads(from_features.stdout)
    assert a["duration"] == pytest.approx(record["duration"])
    assert [(m["start"], m["end"]) for m in a["queries"][0]["moments"]] == \
        [(m["start"], m["end"]) for m in b["queries"][0]["moments"]]
    assert [m["score"] for m in a["queries"][0]["moments"]] == \
        pytest.approx([m["score"] for m in b["queries"][0]["moments"]], abs=1e-4)


@pytest.mark.slow
def test_prediction_refuses_a_cut_download_in_one_line_naming_the_file(trained_tan, tmp_path):
    video = tmp_path / "cut.mp4"
    cut_download(str(video))
    proc = run_main("predict", "--ckpt", os.path.join(trained_tan, "model_final.pth"), "--video-file", str(video),
                    "--query", "a red square", "--json")
    assert proc.returncode == 2 and proc.stdout == "" and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1].endswith(f"video file {str(video)!r}: {TRUNCATED}: {CUT_DOWNLOAD}")


@pytest.mark.slow
def test_mmn_predicts_from_a_video_file_through_the_python_api(video_dataset, tmp_path):
    import tan

    out = str(tmp_path / "mmn")
    proc = run_main("train_net", "--config-file", MMN_VIDEOS, "DATASETS.ROOT", video_dataset, "OUTPUT_DIR", out,
                    "MODEL.DEVICE", "cpu", "SOLVER.MAX_EPOCH", "1", "--skip-test")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    model = tan.load_model(os.path.join(out, "model_final.pth"))
    record = json.loads(open(os.path.join(video_dataset, "data", "test.jsonl")).readline())
    encoded = model.encode_video_file(os.path.join(video_dataset, "videos", f"{record['vid']}.mp4"))
    assert encoded.duration == pytest.approx(record["duration"])
    [moments] = model.ground(encoded, [record["query"]], topk=3)
    assert 1 <= len(moments) <= 3 and all(0 <= m.start < m.end <= record["duration"] + 1e-6 for m in moments)


@pytest.mark.slow
def test_a_checkpoint_without_records_says_how_to_predict(trained_tan, tmp_path):
    import torch

    import tan

    checkpoint = torch.load(os.path.join(trained_tan, "model_final.pth"), map_location="cpu", weights_only=False)
    records = checkpoint.pop("extractors")  # as a run on features made elsewhere saves it
    plain = str(tmp_path / "plain.pth")
    torch.save(checkpoint, plain)
    video = tmp_path / "v.mp4"
    solid_video(str(video), [100] * 10)
    # its training data's folders are not here either: nothing says how the features were made
    model = tan.load_model(plain, overrides=("DATASETS.ROOT", str(tmp_path / "elsewhere")))
    with pytest.raises(TanError, match="does not say how its video features were made.*pass them with --features"):
        model.encode_video_file(str(video))
    with pytest.raises(TanError, match="does not say which text encoder made them"):
        model.encode_sentences(["a red square"])
    # where they are, the records now in them say it (written there since, e.g. by --records-only)
    model = tan.load_model(plain)
    encoded = model.encode_video_file(str(video))
    assert encoded.duration == pytest.approx(1.0)
    assert model.extractors == records


@pytest.mark.slow
def test_new_sentences_are_encoded_by_the_recorded_text_backbone_as_the_training_files_were(
        video_dataset, trained_tan):
    import tan

    model = tan.load_model(os.path.join(trained_tan, "model_final.pth"))
    record = json.loads(open(os.path.join(video_dataset, "data", "train.jsonl")).readline())
    stored = np.load(os.path.join(video_dataset, "features", "clip_text", f"qid{record['qid']}.npz"))
    rows = stored["last_hidden_state"]
    expected = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    np.testing.assert_allclose(model.encode_sentences([record["query"]])[0], expected, atol=1e-5)


@pytest.mark.slow
def test_a_moved_extractor_model_is_named_and_can_be_pointed_to(video_dataset, trained_tan, tiny_models, tmp_path):
    import shutil

    moved = tmp_path / "elsewhere"
    shutil.copytree(tiny_models["video_transformer"], moved)
    checkpoint = os.path.join(trained_tan, "model_final.pth")
    video_file = os.path.join(video_dataset, "videos", sorted(os.listdir(os.path.join(video_dataset, "videos")))[0])
    hidden = tiny_models["video_transformer"] + ".away"
    os.rename(tiny_models["video_transformer"], hidden)
    try:
        gone = run_main("predict", "--ckpt", checkpoint, "--video-file", video_file, "--query", "a red square")
        assert gone.returncode == 2 and "is not there; give its place on this machine with --extractor-model " \
            "tiny_videomae=FOLDER" in gone.stderr, gone.stderr[-2000:]
        found = run_main("predict", "--ckpt", checkpoint, "--video-file", video_file, "--query", "a red square",
                         "--extractor-model", f"tiny_videomae={moved}")
        assert found.returncode == 0, found.stderr[-2000:]
        other = tmp_path / "other"
        video_backbone("video_transformer").write_tiny(str(other), seed=1)
        import tan

        model = tan.load_model(checkpoint, extractor_models={"tiny_videomae": str(other)})
        with pytest.raises(TanError, match="holds other weights"):
            model.encode_video_file(video_file)
    finally:
        os.rename(hidden, tiny_models["video_transformer"])


@pytest.mark.slow
def test_a_model_on_sentence_features_refuses_an_empty_sentence_as_every_tool_does(video_dataset, trained_tan):
    """Its text backbone would turn "" into features like any sentence's, and the model would answer."""
    import tan

    checkpoint = os.path.join(trained_tan, "model_final.pth")
    video_file = os.path.join(video_dataset, "videos", sorted(os.listdir(os.path.join(video_dataset, "videos")))[0])
    proc = run_main("predict", "--ckpt", checkpoint, "--video-file", video_file, "--query", " ")
    assert proc.returncode == 2 and "Traceback" not in proc.stdout + proc.stderr
    assert (proc.stdout + proc.stderr).strip().splitlines()[-1].endswith(
        "--query 1 ' ' has no word: give a sentence to ground, with at least one word")
    model = tan.load_model(checkpoint)
    with pytest.raises(TanError, match=r"sentence 1 '' has no word: give a sentence to ground, with at least one word"):
        model.encode_sentences([""])


@pytest.mark.parametrize("stated, end, cut", [(6.0, 2.9, True), (6.0, 5.2, False), (400.0, 385.0, True),
                                              (400.0, 391.0, False), (7200.0, 6840.0, True)])
def test_a_long_file_missing_more_than_10_s_of_its_header_s_length_is_truncated(stated, end, cut):
    """A frame or two of slack for a short clip's header, never minutes of a long one: a 2-hour movie
    whose download stopped 6 minutes early (5% of it) is refused."""
    from fractions import Fraction
    from types import SimpleNamespace

    from tan.video.decode import TRUNCATED, VideoError, check_not_truncated

    stream = SimpleNamespace(duration=int(stated * 1000), time_base=Fraction(1, 1000), type="video")
    container = SimpleNamespace(duration=None, streams=[stream])
    if not cut:
        check_not_truncated(container, stream, end)
        return
    with pytest.raises(VideoError) as refused:
        check_not_truncated(container, stream, end)
    assert refused.value.reason == TRUNCATED and f"it decodes to {end:.1f} s of the {stated:.1f} s" in str(refused.value)
