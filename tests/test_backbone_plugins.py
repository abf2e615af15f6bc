"""A video backbone of a plug-in (docs/video.md §5): written into a temporary .py file, imported by
``tan-extract-features --plugins``, run by ``--backbone``, named in the record so that prediction
builds it again in another process; the errors for an unknown name, a taken name and a plug-in that
is gone."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("av")

from tan.config.plugins import plugin_of  # noqa: E402
from tan.data.features.provenance import read_extractor  # noqa: E402
from tan.errors import TanError  # noqa: E402
from tan.video.backbones import backbone_names  # noqa: E402
from tan.video.decode import check_sampling, clip_chunks  # noqa: E402
from tan.video.featurize import build_recorded  # noqa: E402
from tan_apps.synthetic.videos import write_video  # noqa: E402

from conftest import REPO, run_main  # noqa: E402


def worked_example():
    """The plug-in of docs/video.md §5, as the page shows it: the Python block of that section."""
    with open(os.path.join(REPO, "docs", "video.md"), encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("## 5. A backbone of your own"):text.index("## 6. ")]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


CLIP_SECONDS = 0.5  # 2 frames per clip: 4 frames a second


def extract_tool(*args):
    return run_main("extract_features", *args)


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    """The worked example's file, my_backbones.py (each clip's 2 frames averaged, 8 x 8 pixels scaled to
    [0, 1], through a fixed linear layer whose [6, 192] weights are the --model file); one path for the
    module, which is imported once per process."""
    path = tmp_path_factory.mktemp("plugin") / "my_backbones.py"
    path.write_text(worked_example())
    return str(path)


@pytest.fixture(scope="module")
def extracted(plugin, tmp_path_factory):
    """(weights file, video file, feature folder) of the plug-in's tiny weights run over a 2.5 s video."""
    root = tmp_path_factory.mktemp("extracted")
    weights = str(root / "my_backbone.npy")
    made = extract_tool("--write-tiny", weights, "--backbone", "my_backbone", "--plugins", plugin)
    assert made.returncode == 0, made.stderr[-2000:]
    (root / "videos").mkdir()
    video = str(root / "videos" / "v.mp4")
    levels = np.arange(25) * 10
    write_video(video, np.stack([np.full((16, 16, 3), (g, 255 - g, 100), np.uint8) for g in levels]), 10)
    out = str(root / "features")
    run = extract_tool("--videos", str(root / "videos"), "--plugins", plugin, "--backbone", "my_backbone",
                       "--model", weights, "--output", out, "--clip-seconds", CLIP_SECONDS, "--device", "cpu")
    assert run.returncode == 0, run.stderr[-2000:]
    return weights, video, out


def by_hand(weights, video):
    """The plug-in's rows of ``video`` computed here: the same decoding, then numpy."""
    frames = np.concatenate([c.frames for c in clip_chunks(video, check_sampling(4, CLIP_SECONDS, 8), 16)])
    mean = (frames.astype(np.float32) / 255).mean(1).reshape(len(frames), -1)
    return mean @ np.load(weights).T


def test_the_cli_runs_a_plugin_s_backbone_and_its_record_names_the_plugin(plugin, extracted):
    weights, video, out = extracted
    with np.load(os.path.join(out, "v.npz")) as stored:
        rows, duration = stored["features"], float(stored["duration"])
    assert rows.shape == (5, 6) and rows.dtype == np.float32 and duration == pytest.approx(2.5)
    np.testing.assert_allclose(rows, by_hand(weights, video), rtol=1e-5, atol=1e-5)
    assert not np.allclose(rows[0], rows[-1])  # the colour changes along the video
    record = read_extractor(out)
    assert record["backbone"] == "my_backbone" and record["plugin"] == plugin
    assert record["model"] == weights and record["weights"].startswith("sha256:")
    assert (record["dim"], record["resolution"], record["frames_per_clip"], record["frame_rate"]) == (6, 8, 2, 4)


def test_the_record_names_a_plugin_by_the_path_it_came_from_or_by_its_module_and_a_built_in_one_not_at_all(
        plugin, extracted):
    assert plugin_of("my_backbones") == plugin  # imported by path (the fixture's run)
    assert plugin_of("my_lab.backbones") == "my_lab.backbones"  # an importable module: by its name
    assert plugin_of("tan.video.backbones.clip") is None and plugin_of("__main__") is None


def test_an_unknown_backbone_is_one_line_naming_the_registered_ones_and_plugins(tmp_path):
    common = ["--model", str(tmp_path / "m"), "--output", str(tmp_path / "out")]
    for what, kind in ((["--videos", str(tmp_path)], "video"), (["--queries", str(tmp_path / "q.jsonl")], "text")):
        proc = extract_tool(*what, "--backbone", "no_such_backbone", *common)
        assert proc.returncode == 2, proc.stderr[-2000:]
        last = proc.stderr.strip().splitlines()
        assert len(last) == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert f"unknown {kind} backbone 'no_such_backbone'; registered: clip" in last[0]
        assert last[0].endswith("a plug-in's backbone needs --plugins MODULE_OR_PATH (its module, or its .py file "
                                "or package folder)")
    assert not os.path.exists(tmp_path / "out")
    tiny = extract_tool("--write-tiny", str(tmp_path / "w"), "--backbone", "no_such_backbone")
    assert tiny.returncode == 2 and "unknown backbone 'no_such_backbone'; registered: clip" in tiny.stderr
    assert "needs --plugins" in tiny.stderr


CLASHES = {
    "taken": ('@register_video_backbone("clip")\nclass Clash(VideoBackbone):\n    def encode(self, frames):\n'
              '        return frames\n',
              "video backbone 'clip' (clash_{0}.Clash): the name is taken by tan.video.backbones.clip.ClipImages; "
              "register the plug-in's backbone under a name of its own"),
    "no_contract": ('@register_video_backbone("loose_{0}")\nclass Loose:\n    def encode(self, frames):\n'
                    '        return frames\n',
                    "is not a subclass of tan.video.backbones.base.VideoBackbone, the contract every video backbone "
                    "follows"),
    "no_encode": ('@register_video_backbone("idle_{0}")\nclass Idle(VideoBackbone):\n    pass\n',
                  "does not implement encode, which the contract requires"),
}


@pytest.mark.parametrize("case", sorted(CLASHES))
def test_a_plugin_backbone_that_breaks_the_contract_or_takes_a_name_is_refused_in_one_line(tmp_path, case):
    code, message = CLASHES[case]
    path = tmp_path / f"clash_{case}.py"
    path.write_text("from tan.video.backbones import register_video_backbone\n"
                    "from tan.video.backbones.base import VideoBackbone\n\n\n" + code.format(case))
    before = backbone_names()
    proc = extract_tool("--videos", str(tmp_path), "--plugins", str(path), "--backbone", "clip", "--model",
                        str(tmp_path / "m"), "--output", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert f"--plugins: plug-in {str(path)!r}: " in last and message.format(case) in last, last
    assert backbone_names() == before and f"clash_{case}" not in sys.modules  # nothing left behind


def test_a_record_s_plugin_that_is_gone_or_registers_nothing_of_its_name_is_named(plugin, extracted, tmp_path):
    record = dict(read_extractor(extracted[2]), backbone="gone_backbone", plugin=str(tmp_path / "gone.py"))
    with pytest.raises(TanError, match=r"made by gone_backbone \(.*\).*, the backbone of plug-in '.*gone\.py', which "
                                       r"is not there; put it back, or import it from where it is now: PLUGINS on "
                                       r"the command line, beside the config's own plug-ins, e\.g\. PLUGINS "
                                       r"\"\['/new/place/gone\.py'\]\""):
        build_recorded(record, "cpu")
    with pytest.raises(TanError, match=f"unknown video backbone 'other_name'.*; plug-in '{re.escape(plugin)}', which "
                                       f"its extractor record names, was imported and registers none of that name"):
        build_recorded(dict(record, backbone="other_name", plugin=plugin), "cpu")
    unnamed = {k: v for k, v in record.items() if k != "plugin"}
    with pytest.raises(TanError, match="unknown video backbone 'gone_backbone'.*whose record names no plug-in: "
                                       "import the plug-in that registers it with PLUGINS on the command line"):
        build_recorded(unnamed, "cpu")


@pytest.mark.slow
def test_another_process_makes_the_same_rows_of_the_video_file_from_the_record_alone(extracted):
    """As prediction from a video file does (tan.api's encode_video_file; rows L2-normalised as the datasets
    read them): nothing names the plug-in but the feature folder's record."""
    weights, video, out = extracted
    script = ("import json, sys\n"
              "from tan.data.features.provenance import read_extractor\n"
              "from tan.video.featurize import VideoFeaturizer\n"
              "featurizer = VideoFeaturizer({'features': [read_extractor(sys.argv[1])]}, 'cpu')\n"
              "rows, duration = featurizer(sys.argv[2])\n"
              "print(json.dumps([type(featurizer.backbones[0]).__name__, rows.tolist(), duration]))\n")
    proc = subprocess.run([sys.executable, "-c", script, out, video], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    name, rows, duration = json.loads(proc.stdout)
    with np.load(os.path.join(out, "v.npz")) as stored:
        assert name == "MeanFrameLinear" and duration == pytest.approx(float(stored["duration"]))
        expected = stored["features"] / np.linalg.norm(stored["features"], axis=1, keepdims=True)  # as read
    np.testing.assert_allclose(np.array(rows, np.float32), expected, rtol=1e-5, atol=1e-6)
