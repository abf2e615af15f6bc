import importlib
import io
import logging
import os
import re
import resource
import signal
import subprocess
import sys
import traceback
from contextlib import contextmanager, redirect_stderr, redirect_stdout

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The measuring harnesses (tools/benchmarking) are tested too.
sys.path.insert(0, os.path.join(REPO, "tools"))
SYNTHETIC_CONFIG = os.path.join(REPO, "configs", "2dtan_synthetic.yaml")
# The real annotation files of TACoS, ActivityNet Captions and Charades-STA, gzip-compressed
# (data/annotations/README.md: where each comes from).
ANNOTATIONS = os.path.join(REPO, "data", "annotations")


def real_annotations(name):
    """The JSON object of the real annotation file ``name`` ("tacos/train.json") of ANNOTATIONS."""
    import gzip
    import json

    with gzip.open(os.path.join(ANNOTATIONS, name + ".gz"), "rt", encoding="utf-8") as f:
        return json.load(f)


FULL_FLAG = "--full"


def pytest_addoption(parser):
    parser.addoption(FULL_FLAG, action="store_true",
                     help="the full suite: the end-to-end tests marked slow too (training runs, processes, signals, "
                          "torchrun, the browser); without it, the everyday tier")


def _test_id(arg):
    """A command-line test id as (file name, test path): tests/test_x.py::test_y -> ("test_x.py", "test_y")."""
    path, _, test = arg.partition("::")
    return os.path.basename(path), test


def _named(nodeid, named):
    """Whether the test ``nodeid`` is, or is part of, one of the ``named`` ids (a class, a parametrized test)."""
    file, test = _test_id(nodeid)
    return any(file == f and (test == t or test.startswith((t + "[", t + "::"))) for f, t in named)


def pytest_collection_modifyitems(config, items):
    """The everyday tier leaves the tests marked ``slow`` out (deselected, and counted as such), except
    a test named on the command line by its id (``tests/test_x.py::test_y``): that one is asked for."""
    if config.getoption(FULL_FLAG) or config.getoption("markexpr"):  # -m chooses for itself
        return
    named = [_test_id(arg) for arg in config.args if "::" in arg]
    slow = [item for item in items if item.get_closest_marker("slow") and not _named(item.nodeid, named)]
    if slow:
        config.hook.pytest_deselected(items=slow)
        left_out = set(map(id, slow))
        items[:] = [item for item in items if id(item) not in left_out]


@pytest.fixture(autouse=True)
def tan_logger_as_it_was():
    """Each test leaves the "tan" logger as it found it: a tool's main called directly (not through
    run_main) sets it up for a console (its own handlers, no propagation), and a later test that reads
    the log through caplog would then see nothing."""
    logger = logging.getLogger("tan")
    saved = list(logger.handlers), logger.level, logger.propagate
    yield
    for handler in list(logger.handlers):
        if handler not in saved[0]:
            logger.removeHandler(handler)
            handler.close()
    logger.handlers[:] = saved[0]
    logger.setLevel(saved[1])
    logger.propagate = saved[2]


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
    from tan_apps.synthetic.features import ensure_synthetic

    root = str(tmp_path_factory.mktemp("datasets"))
    ensure_synthetic(root)
    return root


# A short 2D-TAN run on the built-in dataset that validates every epoch and tests its final and best
# models (tests/test_tools.py, tests/test_workflows.py): model_{1,2,3}e, model_final and model_best.
VALIDATED_RUN = ["MODEL.DEVICE", "cpu", "DATALOADER.NUM_WORKERS", "0", "SOLVER.MAX_EPOCH", "3",
                 "SOLVER.ITERS_PER_EPOCH", "10", "SOLVER.TEST_PERIOD", "1", "SOLVER.MILESTONES", "(2,)",
                 "SOLVER.LOG_PERIOD", "5"]


@pytest.fixture(scope="session")
def validated_run(synthetic_root, tmp_path_factory):
    """(config, OUTPUT_DIR, the tool's CompletedProcess) of VALIDATED_RUN, trained once per session (with
    TensorBoard scalars where tensorboard is installed). Read it; do not train in it again."""
    from tan.config import load_config
    from tan.utils.events import tensorboard_available

    out = tmp_path_factory.mktemp("validated") / "out"
    opts = ["DATASETS.ROOT", synthetic_root, "OUTPUT_DIR", str(out), *VALIDATED_RUN,
            *(["TENSORBOARD", "True"] if tensorboard_available() else [])]
    proc = run_main("train_net", "--config-file", SYNTHETIC_CONFIG, *opts)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return load_config(SYNTHETIC_CONFIG, opts), out, proc


# The long-video benchmarks' configs (tests/test_ego4d_nlq.py, tests/test_mad.py) at a width that trains
# in seconds on a CPU, on their stand-ins' 32-d features.
SMALL_2DTAN = ["MODEL.TAN.FEATPOOL.INPUT_SIZE", "32", "MODEL.TAN.FEATPOOL.HIDDEN_SIZE", "32",
               "MODEL.TAN.INTEGRATOR.QUERY_HIDDEN_SIZE", "32", "MODEL.TAN.INTEGRATOR.LSTM.NUM_LAYERS", "1",
               "MODEL.TAN.PREDICTOR.HIDDEN_SIZE", "32", "MODEL.TAN.PREDICTOR.KERNEL_SIZE", "5",
               "MODEL.TAN.PREDICTOR.NUM_STACK_LAYERS", "2"]
SMALL_MMN = ["MODEL.MMN.FEATPOOL.INPUT_SIZE", "32", "MODEL.MMN.FEATPOOL.HIDDEN_SIZE", "32",
             "MODEL.MMN.JOINT_SPACE_SIZE", "32", "MODEL.MMN.TEXT_ENCODER.LSTM.HIDDEN_SIZE", "32",
             "MODEL.MMN.PREDICTOR.HIDDEN_SIZE", "32", "MODEL.MMN.PREDICTOR.KERNEL_SIZE", "5",
             "MODEL.MMN.PREDICTOR.NUM_STACK_LAYERS", "2"]
STANDIN_RUN = ["MODEL.DEVICE", "cpu", "DATALOADER.NUM_WORKERS", "0", "SOLVER.LR", "0.001"]


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
    from tan_apps.synthetic.videos import generate

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


def long_catalog(folder, videos, seconds, seed):
    """The catalog (its path) of long_train and long_test, synthetic long videos written under ``folder``
    (tan_apps.synthetic.long_videos.write_long_dataset of ``videos``, ``seconds`` and ``seed``), and the
    test features' path."""
    from tan_apps.synthetic.long_videos import write_long_dataset

    written = write_long_dataset(str(folder), videos, seconds, seed=seed)
    (train, train_features), (test, test_features) = written["train"], written["test"]
    catalog = folder / "catalog.yaml"
    catalog.write_text(f"long_train:\n  annotations: {train}\n  features: {train_features}\n"
                       f"  format: seconds\nlong_test:\n  annotations: {test}\n  features: {test_features}\n"
                       f"  format: seconds\n")
    return str(catalog), train_features, test_features


def run_tool(tool, *args, cwd=None, timeout=600, env=None):
    """Run tools/<tool>.py in a fresh interpreter (``env``: variables to add);
    returns the CompletedProcess."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", **(env or {}))
    return subprocess.run([sys.executable, os.path.join(REPO, "tools", f"{tool}.py"), *args], cwd=cwd, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)


FLAGS_WITHOUT_VALUE = ("--skip-test", "--accept-config-changes", "--json", "--keep-going")


def with_overrides(base, *extra):
    """A tool's trailing arguments: the KEY VALUE pairs ``base`` with those of ``extra`` set on top (a
    tool refuses a key given twice), and the flags of ``extra`` (FLAGS_WITHOUT_VALUE) first."""
    from tan.config.setup import merge_overrides

    flags = [a for a in extra if a in FLAGS_WITHOUT_VALUE]
    pairs = [a for a in extra if a not in FLAGS_WITHOUT_VALUE]
    return flags + merge_overrides(base, [str(a) for a in pairs])


def _tool_module(tool):
    """The tan_apps.commands module whose ``cli()`` tools/<tool>.py runs."""
    with open(os.path.join(REPO, "tools", f"{tool}.py"), encoding="utf-8") as f:
        return re.search(r"^from (tan_apps\.commands\.\w+) import cli$", f.read(), re.M).group(1)


@contextmanager
def torch_threads(count):
    """torch's intra-op threads set to ``count`` (None: as they are), restored afterwards: in this
    process, what OMP_NUM_THREADS is to a new one."""
    import torch

    before = torch.get_num_threads()
    if count:
        torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def run_main(tool, *args, cwd=None, env=None, timeout=None):
    """What tools/<tool>.py does, in this process: its ``main(argv)`` under the tools' own ending
    (tan_apps.cli.exit_codes.run_cli: one line and an exit code for what a user can fix), with the console
    captured. Returns a CompletedProcess (returncode, stdout, stderr) like :func:`run_tool`; a bug's
    traceback is in stderr with return code 1, as Python's own ending would give. For tests of
    messages, files, results and exit codes; what is about processes and signals keeps
    :func:`run_tool`. ``env``: only the thread counts (ONE_THREAD) are taken, as torch's threads;
    ``timeout`` is not enforced in one process (accepted so that a call reads as run_tool's)."""
    from tan_apps.cli.exit_codes import run_cli

    unknown = set(env or {}) - set(ONE_THREAD)
    assert not unknown, f"run_main cannot set {sorted(unknown)} for a tool in this process: use run_tool"
    main = importlib.import_module(_tool_module(tool)).main
    logger = logging.getLogger("tan")
    saved = list(logger.handlers), logger.level, logger.propagate
    out, err = io.StringIO(), io.StringIO()
    code, here = 0, os.getcwd()
    logger.handlers[:] = []  # as in a fresh process: what a tool says before it sets logging up is printed
    with redirect_stdout(out), redirect_stderr(err), torch_threads(int((env or {}).get("OMP_NUM_THREADS", 0))):
        try:
            if cwd:
                os.chdir(cwd)
            run_cli(lambda: main([str(a) for a in args]))
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except Exception:  # noqa: BLE001 - a bug: its traceback, as the interpreter would print it
            traceback.print_exc(file=err)
            code = 1
        finally:
            os.chdir(here)
            for handler in list(logger.handlers):  # the tool's console and log.txt handlers
                logger.removeHandler(handler)
                handler.close()
            logger.handlers[:] = saved[0]
            logger.setLevel(saved[1])
            logger.propagate = saved[2]
    return subprocess.CompletedProcess([tool, *args], code, out.getvalue(), err.getvalue())


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


def audio_only(path, frames=10):
    """An MP4 file of silence and no video stream (PyAV must be installed)."""
    import av
    import numpy as np

    with av.open(path, "w", format="mp4") as container:
        stream = container.add_stream("aac", rate=16000)
        for i in range(frames):
            frame = av.AudioFrame.from_ndarray(np.zeros((1, 1024), np.float32), format="fltp", layout="mono")
            frame.sample_rate, frame.pts = 16000, i * 1024
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
