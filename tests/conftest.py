import os
import resource
import signal
import subprocess
import sys
from contextlib import contextmanager

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The measuring harnesses (tools/benchmarking) are tested too.
sys.path.insert(0, os.path.join(REPO, "tools"))
SYNTHETIC_CONFIG = os.path.join(REPO, "configs", "2dtan_synthetic.yaml")


@pytest.fixture(autouse=True)
def sigint_as_in_a_terminal():
    """Each test sees SIGINT as pytest run from a terminal does: raising KeyboardInterrupt.

    Run as a background job (``python -m pytest &`` in a script), pytest starts
    with SIGINT ignored, and an ignored signal stays ignored across fork and
    exec: the tests' own ``os.kill(os.getpid(), SIGINT)`` would do nothing, and
    every tool they launch would ignore the Ctrl-C they send it (as a tool
    should, when started that way). A handled signal is reset to its default
    action in a child at exec, so with this handler in place the tools start
    as they would from a terminal."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.fixture(scope="session")
def synthetic_root(tmp_path_factory):
    """DATASETS.ROOT with the built-in synthetic dataset, generated once per test session."""
    from tan.data.synthetic import ensure_synthetic

    root = str(tmp_path_factory.mktemp("datasets"))
    ensure_synthetic(root)
    return root


# Video files in (tests/test_video_features.py, tests/test_demo.py): tiny random backbones, a small
# synthetic video dataset with its features, and a 2D-TAN trained on them briefly.
TAN_VIDEOS = os.path.join(REPO, "configs", "video", "2dtan_synthetic_videos.yaml")
CLIP_SECONDS = 0.5


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """{backbone: folder} of tiny randomly initialised clip and video_transformer models."""
    from tan.video.backbones import video_backbone

    root = tmp_path_factory.mktemp("models")
    folders = {"clip": str(root / "tiny_clip"), "video_transformer": str(root / "tiny_videomae")}
    for name, folder in folders.items():
        video_backbone(name).write_tiny(folder, seed=0)
    return folders


@pytest.fixture(scope="session")
def video_dataset(tiny_models, tmp_path_factory):
    """A small synthetic video dataset with its three feature folders extracted."""
    from tan.video.backbones import text_backbone, video_backbone
    from tan.video.extract import backbone_sampling, extract_videos, list_videos
    from tan.video.queries import extract_queries, read_query_file
    from tan.video.synthetic import generate

    root = str(tmp_path_factory.mktemp("synthetic_videos"))
    generate(root, splits={"train": 60, "test": 16})
    videos = list_videos([os.path.join(root, "videos")])
    for name, folder in (("clip", "clip"), ("video_transformer", "video_transformer")):
        backbone = video_backbone(name)(tiny_models[name], "cpu")
        summary = extract_videos(videos, backbone, backbone_sampling(backbone, CLIP_SECONDS),
                                 os.path.join(root, "features", folder), workers=2)
        assert not summary.failed and len(summary.written) == len(videos)
    text = text_backbone("clip")(tiny_models["clip"], "cpu")
    queries = [q for split in ("train", "test") for q in read_query_file(os.path.join(root, "data", f"{split}.jsonl"))]
    extract_queries(queries, text, os.path.join(root, "features", "clip_text"))
    return root


@pytest.fixture(scope="session")
def trained_tan(video_dataset, tmp_path_factory):
    """OUTPUT_DIR of a 2D-TAN trained two epochs on ``video_dataset`` (its checkpoints record the extractors)."""
    out = str(tmp_path_factory.mktemp("tan_videos"))
    proc = run_tool("train_net", "--config-file", TAN_VIDEOS, "DATASETS.ROOT", video_dataset, "OUTPUT_DIR", out,
                    "MODEL.DEVICE", "cpu", "SOLVER.MAX_EPOCH", "2", "--skip-test")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return out


# For tests that compare weights bit for bit between separately launched runs:
# with several threads, CPU kernels may split a reduction differently from one
# process to the next, so two runs can differ in the last bits whatever the code.
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def run_tool(tool, *args, cwd=None, timeout=600, env=None):
    """Run tools/<tool>.py in a fresh interpreter (``env``: variables to add);
    returns the CompletedProcess."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", **(env or {}))
    return subprocess.run([sys.executable, os.path.join(REPO, "tools", f"{tool}.py"), *args], cwd=cwd, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)


@contextmanager
def file_size_limit(limit):
    """A real short write in this process: files cannot grow past ``limit`` bytes
    (RLIMIT_FSIZE), and a write beyond it fails with EFBIG instead of SIGXFSZ
    killing the process; both are restored afterwards."""
    previous_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous_handler)
