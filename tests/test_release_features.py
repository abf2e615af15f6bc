"""The benchmarks' released features made from video files: HERO's frame
choice on videos whose frames say their own number, SlowFast's Caffe2 pickle
and openai CLIP's archive (tiny random ones written in those formats) loaded
whole or refused in one line, the release preset's folders, and a model
trained on release-laid features that grounds a new video file as it does
its stored features."""
import json
import logging
import os
import pickle
from fractions import Fraction

import numpy as np
import pytest

av = pytest.importorskip("av")
pytest.importorskip("transformers")

from tan.errors import TanError  # noqa: E402
from tan.video.backbones.clip import ClipImages, ClipText, write_tiny_openai  # noqa: E402
from tan.video.backbones.slowfast import SlowFastClips  # noqa: E402
from tan.video.decode import TRUNCATED, VideoError  # noqa: E402
from tan.video.release_sampling import ReleaseSampling, fast_indices, release_chunks  # noqa: E402
from tan.video.weights.caffe2 import blob_names, load_slowfast  # noqa: E402

from conftest import REPO, audio_only, run_main, run_tool  # noqa: E402
from test_video_features import CUT_DOWNLOAD, cut_download  # noqa: E402

TAN_VIDEOS = os.path.join(REPO, "configs", "video", "2dtan_synthetic_videos.yaml")


def numbered_video(path, count, fps, size=(64, 48), rotation=None, container_format=None, left_half=False):
    """``count`` frames at ``fps`` whose grey level is 2 x their number modulo 128 (lossless FFV1, or
    x264 at quantiser 0): a frame read back says which one it is."""
    with av.open(path, "w", format=container_format) as container:
        codec = "ffv1" if path.endswith(".mkv") else "libx264rgb"
        stream = container.add_stream(codec, rate=Fraction(fps).limit_denominator(1001))
        stream.width, stream.height = size
        stream.pix_fmt = "bgr0" if codec == "ffv1" else "rgb24"
        if codec == "libx264rgb":
            stream.options = {"qp": "0"}
        if rotation is not None:
            stream.set_display_rotation(rotation)
        for i in range(count):
            picture = np.full((size[1], size[0], 3), (2 * i) % 256, np.uint8)
            if left_half:  # bright: which way is up
                picture[:, :size[0] // 2] = 255
            for packet in stream.encode(av.VideoFrame.from_ndarray(picture, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def frame_numbers(frames):
    """The frame number each [S, S, 3] frame shows (its grey level / 2, the bright corner left out)."""
    s = frames.shape[-2]
    centre = frames[..., s // 2 - 2:s // 2 + 2, s // 2 - 2:s // 2 + 2, 0].astype(float)
    return np.rint(centre.mean((-1, -2)) / 2).astype(int)


def streams_of(path, clip_seconds=2, resolution=32):
    samplings = [ReleaseSampling("images", clip_seconds, resolution), ReleaseSampling("clips", clip_seconds,
                                                                                      resolution)]
    out, ends = {0: [], 1: []}, {}
    for i, chunk in release_chunks(path, samplings, clips_per_chunk=2):
        out[i].append(chunk.frames)
        ends[i] = chunk.end if chunk.end is not None else ends.get(i)
    return np.concatenate(out[0]), np.concatenate(out[1]), ends


def test_fast_frames_are_hero_s_at_30_29_and_60_frames_a_second():
    assert fast_indices(60, 30).tolist() == list(range(0, 60, 2)) + [59, 59]
    at_29 = fast_indices(60, 29).tolist()
    assert at_29[:3] == [0, 1, 3] and at_29[-3:] == [56, 58, 59]
    at_60 = fast_indices(60, 60).tolist()  # the span is PySlowFast's for 60 frames a second: half the clip
    assert at_60[:15] == [0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 45, 49, 53, 57] and at_60[15:] == [59] * 17


def test_slowfast_clips_hold_hero_s_frames_padded_with_the_last_second(tmp_path):
    path = str(tmp_path / "count.mp4")
    numbered_video(path, 150, 30)  # 5 s: clips 0-2 s, 2-4 s, and 4-5 s completed with its own second
    images, clips, ends = streams_of(path)
    assert clips.shape[:2] == (3, 32) and ends == {0: 5.0, 1: 5.0}
    numbers = frame_numbers(clips)
    chosen = fast_indices(60, 30)
    assert numbers[0].tolist() == chosen.tolist()
    assert numbers[1].tolist() == (60 + chosen).tolist()
    assert numbers[2].tolist() == [(120 + i % 30) % 128 for i in chosen.tolist()]  # the last second, twice
    # CLIP: the frame on screen at about the middle of each clip, one row a clip (fps filter at 0.5/s)
    assert images.shape[:2] == (3, 1)
    assert frame_numbers(images[:, 0]).tolist() == [29, 89, 149 % 128]


@pytest.mark.parametrize("name,form", [("clock.ts", "mpegts"), ("bare.h264", "h264")])
def test_a_clock_that_starts_late_and_frames_without_times_are_read_as_ffmpeg_reads_them(tmp_path, name, form):
    """An MPEG-TS clock starts at 1.4 s, and the frames of a bare H.264 stream carry no time: counted
    from the file's start, one frame after another, they give the rows of an MP4 of the same frames."""
    path = str(tmp_path / name)
    numbered_video(path, 150, 30, container_format=form)
    images, clips, _ = streams_of(path)
    assert frame_numbers(images[:, 0]).tolist() == [29, 89, 149 % 128]
    assert len(clips) == 3 and frame_numbers(clips[1]).tolist() == (60 + fast_indices(60, 30)).tolist()


def test_a_video_shorter_than_half_a_clip_gives_one_row_of_each_stream(tmp_path):
    path = str(tmp_path / "short.mp4")
    numbered_video(path, 12, 30)  # 0.4 s: FFmpeg's fps filter at one frame per 2 s gives no frame at all
    images, clips, _ = streams_of(path)
    assert len(images) == 1 and len(clips) == 1
    assert frame_numbers(images[:, 0]).tolist() == [11]  # the last frame
    # 12 frames, then the last one to a whole second, then that second again to a whole clip
    assert frame_numbers(clips[0]).tolist() == [min(i % 30, 11) for i in fast_indices(60, 30).tolist()]


def test_mkv_without_a_frame_count_and_a_rotated_phone_video_are_read_upright(tmp_path):
    mkv = str(tmp_path / "lossless.mkv")
    numbered_video(mkv, 90, 25)
    images, clips, ends = streams_of(mkv)
    assert len(images) == 2 and len(clips) == 2 and ends[1] == pytest.approx(3.6)
    phone = str(tmp_path / "phone.mp4")
    numbered_video(phone, 30, 30, size=(64, 32), rotation=-90, left_half=True)  # stored landscape, shown portrait
    upright, _, _ = streams_of(phone, resolution=32)
    bright = upright[0, 0, :, :, 0] > 250
    # shown turned a quarter clockwise, the stored left half is the top: the crop's upper half is bright
    # (scaled by its stored size, as HERO does, it would be squashed and bright on the left)
    assert bright[:14].all() and not bright[18:].any()


def test_a_cut_download_is_refused_before_its_length_is_given_and_a_file_that_states_none_is_read(tmp_path):
    path = str(tmp_path / "cut.mp4")
    whole = cut_download(path)
    ends = []
    with pytest.raises(VideoError) as caught:
        for _, chunk in release_chunks(path, [ReleaseSampling("images", 2, 32), ReleaseSampling("clips", 2, 32)]):
            ends.append(chunk.end)
    assert caught.value.reason == TRUNCATED and caught.value.detail == CUT_DOWNLOAD
    assert ends == [None] * len(ends)  # no chunk gave the header's 6 s as the length of what was decoded
    open(path, "wb").write(whole)
    assert streams_of(path)[2] == {0: 6.0, 1: 6.0}
    # a bare stream states no length: its cut tail cannot be told from a shorter video, which it reads as
    bare = str(tmp_path / "bare.h264")
    numbered_video(bare, 150, 30, container_format="h264")
    data = open(bare, "rb").read()
    open(bare, "wb").write(data[:len(data) // 2])
    images, clips, ends = streams_of(bare)
    assert 0 < len(clips) < 3 and ends[0] == ends[1] < 5.0


@pytest.fixture(scope="module")
def tiny_release(tmp_path_factory):
    """--preset qvhighlights's streams, of tiny random weights (SlowFast at 32 px)."""
    from tan.video.presets import preset

    weights = str(tmp_path_factory.mktemp("tiny_release"))
    SlowFastClips.write_tiny(f"{weights}/SLOWFAST_tiny.pkl", seed=0)
    write_tiny_openai(f"{weights}/ViT-tiny.pt", seed=0)
    backbones = {"clip": ClipImages(f"{weights}/ViT-tiny.pt", "cpu"),
                 "slowfast": SlowFastClips(f"{weights}/SLOWFAST_tiny.pkl", "cpu", resolution=32)}
    release = preset("qvhighlights")
    streams = [(s.folder, backbones[s.backbone], release.sampling(s, backbones[s.backbone].resolution, "bilinear"))
               for s in release.streams]
    return streams


def test_the_release_s_files_record_their_video_file_and_a_changed_one_is_made_again(tiny_release, tmp_path,
                                                                                      caplog):
    """A cut download gives no file, and is made once the whole file replaces it; a video file changed
    since its files were written is made again; the rows stay what lighthouse's readers read."""
    from tan.video.extract import list_videos
    from tan.video.release import extract_release

    caplog.set_level(logging.INFO, logger="tan")
    streams = tiny_release
    videos = tmp_path / "videos"
    videos.mkdir()
    whole = cut_download(str(videos / "cut.mp4"))
    numbered_video(str(videos / "good.mp4"), 60, 30)
    out = tmp_path / "features"

    def extract():
        return extract_release(list_videos([str(videos)]), streams, str(out))

    first = extract()
    assert first.written == ["good"] and first.failed == {"cut": (TRUNCATED, CUT_DOWNLOAD)}
    assert f"    {videos / 'cut.mp4'} ({CUT_DOWNLOAD})" in first.text().splitlines()
    for folder in ("clip", "slowfast"):
        assert sorted(os.listdir(out / folder)) == ["extractor.json", "good.npz"]
        stored = np.load(out / folder / "good.npz")
        assert stored.files == ["features", "source_size", "source_mtime_ns"]
        assert stored["features"].dtype == np.float16 and len(stored["features"]) == 1
        info = os.stat(videos / "good.mp4")
        assert int(stored["source_size"]) == info.st_size and int(stored["source_mtime_ns"]) == info.st_mtime_ns
    good = (out / "slowfast" / "good.npz").read_bytes()
    (videos / "cut.mp4").write_bytes(whole)
    second = extract()
    assert second.written == ["cut"] and second.skipped == ["good"] and not second.failed
    assert [len(np.load(out / f / "cut.npz")["features"]) for f in ("clip", "slowfast")] == [3, 3]
    assert (out / "slowfast" / "good.npz").read_bytes() == good and "changed since" not in caplog.text
    numbered_video(str(videos / "good.mp4"), 90, 30)  # made again, 3 s long
    third = extract()
    assert third.written == ["good"] and third.skipped == ["cut"]
    assert ("1 video files changed since their features were written (or their features cannot be read); "
            "extracting them again: good") in caplog.text
    assert [len(np.load(out / f / "good.npz")["features"]) for f in ("clip", "slowfast")] == [2, 2]


def test_prediction_from_a_cut_download_is_refused_naming_the_file(tiny_release, tmp_path):
    """What tan-predict --video-file, the Python API and the demo page run for a model trained on
    release features: the file is refused in one line, not grounded as a 3-s video said to last 6 s."""
    from tan.data.features.provenance import read_extractor
    from tan.video.extract import list_videos
    from tan.video.featurize import VideoFeaturizer
    from tan.video.release import extract_release

    streams = tiny_release
    videos = tmp_path / "videos"
    videos.mkdir()
    numbered_video(str(videos / "a.mp4"), 30, 30)
    out = tmp_path / "features"
    extract_release(list_videos([str(videos)]), streams, str(out))
    records = [read_extractor(str(out / folder)) for folder in ("clip", "slowfast")]
    featurize = VideoFeaturizer({"features": records}, "cpu")
    cut = str(tmp_path / "cut.mp4")
    cut_download(cut)
    with pytest.raises(TanError) as caught:
        featurize(cut)
    assert str(caught.value) == f"video file {cut!r}: {TRUNCATED}: {CUT_DOWNLOAD}"


def test_a_file_without_video_gives_one_reason(tmp_path):
    path = str(tmp_path / "sound.mp4")
    audio_only(path, frames=5)
    with pytest.raises(VideoError, match="no video stream"):
        streams_of(path)


def test_the_caffe2_pickle_loads_every_tensor_and_a_wrong_file_is_named(tmp_path):
    path = str(tmp_path / "SLOWFAST_tiny.pkl")
    SlowFastClips.write_tiny(path, seed=3)
    with open(path, "rb") as f:
        blobs = pickle.load(f, encoding="latin1")["blobs"]
    network = load_slowfast(path)
    names = blob_names(network.shape)
    for name, tensor in network.state_dict().items():
        if not name.endswith("num_batches_tracked"):
            assert np.array_equal(tensor.numpy(), blobs[names[name]]), name
    frames = np.random.default_rng(0).integers(0, 255, (3, 32, 32, 32, 3), dtype=np.uint8)
    backbone = SlowFastClips(path, "cpu", resolution=32)
    together, alone = backbone.encode(frames), backbone.encode(frames[1:2])
    assert together.shape == (3, 288) and np.abs(together[1] - alone[0]).max() < 1e-5  # eval mode: no batch mixing

    def refused(content, *expected):
        bad = str(tmp_path / "bad.pkl")
        with open(bad, "wb") as f:
            f.write(content)
        with pytest.raises(TanError) as e:
            load_slowfast(bad)
        message = str(e.value)
        assert "\n" not in message and bad in message and "SLOWFAST_8x8_R50.pkl" in message
        for text in expected:
            assert text in message

    raw = open(path, "rb").read()
    refused(raw[:len(raw) // 2], "truncated")
    without = dict(blobs)
    del without["res4_2_branch2b_bn_riv"]
    refused(pickle.dumps({"blobs": without}), "res4_2_branch2b_bn_riv")
    wrong = dict(blobs, res3_0_branch2a_w=np.zeros((1, 1, 1, 1, 1), np.float32))
    refused(pickle.dumps({"blobs": wrong}), "res3_0_branch2a_w", "(1, 1, 1, 1, 1)")
    refused(pickle.dumps({"model": 1}), "blobs")
    with pytest.raises(TanError, match="no such file"):
        load_slowfast(str(tmp_path / "absent.pkl"))


def test_openai_s_archive_loads_into_the_same_weights_and_its_vocabulary_reads_sentences(tmp_path):
    import torch
    from transformers import CLIPModel

    path = str(tmp_path / "weights" / "ViT-tiny.pt")
    write_tiny_openai(path, seed=1)
    assert os.path.isfile(os.path.join(os.path.dirname(path), "bpe_simple_vocab_16e6.txt.gz"))
    images = ClipImages(path, "cpu")
    assert torch.jit.load(path).state_dict()["visual.proj"].shape == (64, 32)
    # the archive's tensors, renamed, are the model it was written from
    torch.manual_seed(1)
    rows = images.encode(np.random.default_rng(0).integers(0, 255, (2, 1, 32, 32, 3), dtype=np.uint8))
    assert rows.shape == (2, 32) and np.isfinite(rows).all()
    assert isinstance(images.model, CLIPModel)
    text = ClipText(path, "cpu", max_length=32)
    (short, pooled), (long, _) = text.encode(["the person rinses the knife", "word " * 60])
    assert pooled.shape == (32,) and short.shape[1] == 64 and len(long) == 32  # start, 30 tokens, end
    ids = text.tokenizer("word " * 60, truncation=True, max_length=32)["input_ids"]
    # a long sentence keeps its start and end tokens
    assert ids[0] == text.tokenizer.bos_token_id and ids[-1] == text.tokenizer.eos_token_id
    # openai's cleaning first: a curly apostrophe and an HTML entity read as the plain characters
    (curly, _), (plain, _) = text.encode(["she don\u2019t stop &amp; go", "she don't stop & go"])
    assert np.array_equal(curly, plain)
    torch.save({"a": torch.zeros(1)}, str(tmp_path / "other.pt"))
    with pytest.raises(TanError, match="openai CLIP ViT tensors"):
        ClipImages(str(tmp_path / "other.pt"), "cpu")


@pytest.fixture(scope="module")
def release_dataset(tmp_path_factory):
    """(root, weights folder) of synthetic videos with their features made by --preset charades with tiny
    weights (SlowFast at 32 px), a catalog ``release.yaml`` of them, and their annotations."""
    from tan_apps.synthetic.videos import generate

    root = str(tmp_path_factory.mktemp("release"))
    generate(root, splits={"train": 24, "test": 4})
    weights = str(tmp_path_factory.mktemp("weights"))
    assert run_main("extract_features", "--write-tiny", f"{weights}/SLOWFAST_tiny.pkl", "--backbone",
                    "slowfast").returncode == 0
    assert run_main("extract_features", "--write-tiny", f"{weights}/ViT-tiny.pt", "--backbone",
                    "clip").returncode == 0
    features = os.path.join(root, "features")
    made = run_main("extract_features", "--videos", os.path.join(root, "videos"), *preset_args(weights),
                    "--output", features)
    assert made.returncode == 0, made.stderr[-3000:]
    texts = run_main("extract_features", "--queries", *[os.path.join(root, "data", f"{s}.jsonl")
                                                        for s in ("train", "test")],
                     "--preset", "charades", "--clip-model", f"{weights}/ViT-tiny.pt", "--output", features)
    assert texts.returncode == 0, texts.stderr[-3000:]
    with open(os.path.join(root, "release.yaml"), "w") as f:
        json.dump({f"release_{s}": {"annotations": f"data/{s}.jsonl", "format": "jsonl",
                                    "features": ["features/clip", "features/slowfast"],
                                    "text_features": "features/clip_text"} for s in ("train", "test")}, f)
    return root, weights


def preset_args(weights):
    return ["--preset", "charades", "--clip-model", f"{weights}/ViT-tiny.pt", "--slowfast-model",
            f"{weights}/SLOWFAST_tiny.pkl", "--resolution", "32"]


RELEASE = ("DATASETS.CATALOG", "release.yaml", "DATASETS.TEST", "('release_test',)")


def train_on(root, out):
    trained = run_tool("train_net", "--config-file", TAN_VIDEOS, "DATASETS.ROOT", root, *RELEASE,
                       "DATASETS.TRAIN", "('release_train',)", "MODEL.TAN.FEATPOOL.INPUT_SIZE", "320",
                       "INPUT.PRE_QUERY_SIZE", "64", "OUTPUT_DIR", out, "MODEL.DEVICE", "cpu", "SOLVER.MAX_EPOCH",
                       "1", "--skip-test")
    assert trained.returncode == 0, trained.stdout[-2000:] + trained.stderr[-3000:]
    return os.path.join(out, "model_final.pth")


def answers_from_file_and_features(root, checkpoint):
    record = json.loads(open(os.path.join(root, "data", "test.jsonl")).readline())
    video_file = os.path.join(root, "videos", f"{record['vid']}.mp4")
    from_file = run_main("predict", "--ckpt", checkpoint, "--video-file", video_file, "--query", record["query"],
                         "--json", "DATASETS.ROOT", root, *RELEASE)
    assert from_file.returncode == 0, from_file.stderr[-3000:]
    from_features = run_main("predict", "--ckpt", checkpoint, "--video", record["vid"], "--duration",
                             str(record["duration"]), "--query", record["query"], "--json", "DATASETS.ROOT", root,
                             *RELEASE)
    assert from_features.returncode == 0, from_features.stderr[-3000:]
    a, b = json.loads(from_file.stdout)["queries"][0], json.loads(from_features.stdout)["queries"][0]
    assert [(m["start"], m["end"]) for m in a["moments"]] == [(m["start"], m["end"]) for m in b["moments"]]
    assert [m["score"] for m in a["moments"]] == pytest.approx([m["score"] for m in b["moments"]], abs=1e-5)
    return video_file, record["query"]


@pytest.fixture(scope="module")
def release_checkpoint(release_dataset, tmp_path_factory):
    """A model trained one epoch on ``release_dataset``'s features (its checkpoint records the preset's extractors)."""
    return train_on(release_dataset[0], str(tmp_path_factory.mktemp("release_run")))


@pytest.mark.slow
def test_a_model_trained_on_release_laid_features_grounds_a_new_video_file_as_its_stored_features(
        release_dataset, release_checkpoint, tmp_path):
    root, weights = release_dataset
    stored = np.load(os.path.join(root, "features", "slowfast", "synvid_test_0000.npz"))
    assert stored.files == ["features", "source_size", "source_mtime_ns"] and stored["features"].dtype == np.float16
    checkpoint = release_checkpoint
    video_file, query = answers_from_file_and_features(root, checkpoint)
    moved = str(tmp_path / "moved.pkl")
    os.rename(f"{weights}/SLOWFAST_tiny.pkl", moved)
    try:
        gone = run_main("predict", "--ckpt", checkpoint, "--video-file", video_file, "--query", query)
        assert gone.returncode != 0 and "SLOWFAST_tiny.pkl" in gone.stderr and "model_zoo" in gone.stderr
    finally:
        os.rename(moved, f"{weights}/SLOWFAST_tiny.pkl")


@pytest.mark.slow
def test_tan_predict_refuses_a_cut_download_in_one_line_naming_the_file(release_checkpoint, tmp_path):
    video = tmp_path / "cut.mp4"
    cut_download(str(video))
    proc = run_main("predict", "--ckpt", release_checkpoint, "--video-file", str(video), "--query", "a red square",
                    "--json")
    assert proc.returncode == 2 and proc.stdout == "" and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1].endswith(f"video file {str(video)!r}: {TRUNCATED}: {CUT_DOWNLOAD}")


@pytest.mark.slow
def test_the_preset_refuses_a_cut_download_in_one_line_and_extracts_it_once_it_is_whole(release_dataset, tmp_path):
    _, weights = release_dataset
    videos = tmp_path / "videos"
    videos.mkdir()
    whole = cut_download(str(videos / "cut.mp4"))
    numbered_video(str(videos / "good.mp4"), 60, 30)
    out = tmp_path / "features"
    args = ["--videos", str(videos), *preset_args(weights), "--output", str(out)]
    proc = run_main("extract_features", *args)
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    assert proc.stdout.splitlines() == [f"1 videos written (2 clips), 0 already there, 1 failed, in {out}",
                                        f"  {TRUNCATED}: 1", f"    {videos / 'cut.mp4'} ({CUT_DOWNLOAD})"]
    assert [sorted(os.listdir(out / f)) for f in ("clip", "slowfast")] == [["extractor.json", "good.npz"]] * 2
    good = [(out / f / "good.npz").read_bytes() for f in ("clip", "slowfast")]
    (videos / "cut.mp4").write_bytes(whole)
    rerun = run_main("extract_features", *args)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr[-3000:]
    assert rerun.stdout.splitlines() == [f"1 videos written (6 clips), 1 already there, 0 failed, in {out}"]
    assert [(out / f / "good.npz").read_bytes() for f in ("clip", "slowfast")] == good  # not done twice
    assert [len(np.load(out / f / "cut.npz")["features"]) for f in ("clip", "slowfast")] == [6, 6]
    again = run_main("extract_features", *args)
    assert again.returncode == 0 and again.stdout.splitlines() == [
        f"0 videos written (0 clips), 2 already there, 0 failed, in {out}"]


@pytest.mark.slow
def test_a_model_trained_on_a_downloaded_release_grounds_video_files_once_its_folders_are_labelled(
        release_dataset, tmp_path):
    """A release as downloaded has no extractor records, so its checkpoint records none: after
    --records-only labels its folders, prediction makes a video file's features as the release's."""
    import shutil

    source, weights = release_dataset
    root = str(tmp_path / "downloaded")
    shutil.copytree(source, root)
    for stream in ("clip", "slowfast", "clip_text"):
        os.remove(os.path.join(root, "features", stream, "extractor.json"))
    checkpoint = train_on(root, str(tmp_path / "run"))
    record = json.loads(open(os.path.join(root, "data", "test.jsonl")).readline())
    video_file = os.path.join(root, "videos", f"{record['vid']}.mp4")
    unknown = run_main("predict", "--ckpt", checkpoint, "--video-file", video_file, "--query", record["query"],
                       "DATASETS.ROOT", root, *RELEASE)
    assert unknown.returncode != 0 and "does not say how" in unknown.stderr
    wrong = run_main("extract_features", "--records-only", *preset_args(weights), "--output",
                     os.path.join(root, "data"))
    assert wrong.returncode == 2 and "expected a folder of the release's .npz files" in wrong.stderr
    labelled = run_main("extract_features", "--records-only", *preset_args(weights), "--output",
                        os.path.join(root, "features"))
    assert labelled.returncode == 0, labelled.stderr[-3000:]
    answers_from_file_and_features(root, checkpoint)


def test_a_bad_weights_file_is_refused_in_one_line_before_anything_is_written(tmp_path):
    videos = tmp_path / "videos"
    videos.mkdir()
    numbered_video(str(videos / "v.mp4"), 30, 30)
    weights = tmp_path / "weights"
    clip_model = str(weights / "ViT-tiny.pt")
    write_tiny_openai(clip_model)
    slowfast = str(weights / "SLOWFAST_tiny.pkl")
    SlowFastClips.write_tiny(slowfast)
    whole = open(slowfast, "rb").read()
    cut = str(weights / "cut.pkl")
    open(cut, "wb").write(whole[:1000])
    out = str(tmp_path / "features")
    for args, named in ((["--slowfast-model", cut, "--clip-model", clip_model], cut),
                        (["--slowfast-model", str(weights / "gone.pkl"), "--clip-model", clip_model], "gone.pkl"),
                        (["--slowfast-model", slowfast, "--clip-model", slowfast], slowfast)):
        proc = run_main("extract_features", "--videos", str(videos), "--preset", "qvhighlights", *args,
                        "--output", out)
        assert proc.returncode == 2, proc.stderr[-2000:]
        errors = [line for line in proc.stderr.splitlines() if "error" in line.lower()]
        assert len(errors) == 1 and named in errors[0], proc.stderr[-2000:]
        assert not os.path.exists(out)
    half = str(weights / "half.pt")
    open(half, "wb").write(open(clip_model, "rb").read()[:5000])
    with pytest.raises(TanError, match="half.pt.*neither a TorchScript archive nor a state dict of tensors"):
        ClipImages(half, "cpu")
