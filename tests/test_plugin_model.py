"""A model that lives outside the package (projects/dot_map), loaded by PLUGINS:
it trains with its own Trainer subclass (another optimizer, one more hook),
resumes bit for bit after a kill, evaluates, predicts, draws pictures and runs
under torchrun with the stock tools, and its settings get the usual checks;
nothing in tan/ names it."""
import json
import os
import subprocess
import sys

import pytest
import torch

from conftest import ONE_THREAD, REPO, run_main, run_tool, with_overrides
from runs import final_weights, result_metrics as metrics, stop_process_group, wait_for_training_record

pytestmark = pytest.mark.slow

PROJECT = os.path.join(REPO, "projects", "dot_map")
CONFIG = os.path.join(PROJECT, "dot_map_synthetic.yaml")
# The project's own config names it relative to the repository root; the tests may run from elsewhere.
SHORT = ["PLUGINS", repr([PROJECT]), "MODEL.DEVICE", "cpu", "SOLVER.LOG_PERIOD", "4", "SOLVER.TEST_PERIOD", "0",
         "SOLVER.MAX_EPOCH", "3", "SOLVER.MILESTONES", "(3,)", "MODEL.DOT_MAP.WARMUP_EPOCHS", "2"]


def train_args(root, out, *extra):
    return ["--config-file", CONFIG, *with_overrides(["DATASETS.ROOT", root, "OUTPUT_DIR", str(out), *SHORT], *extra)]


@pytest.fixture(scope="module")
def trained(synthetic_root, tmp_path_factory):
    """Three epochs of DOT_MAP (about 15 s), then the test of the final model."""
    out = tmp_path_factory.mktemp("dot_map") / "out"
    proc = run_main("train_net", *train_args(synthetic_root, out), env=ONE_THREAD, cwd=str(out.parent))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return out


def test_no_line_of_the_packages_names_the_example_model():
    named = []
    for folder, _, files in [entry for package in ("tan", "tan_apps") for entry in os.walk(os.path.join(REPO, package))]:
        for name in files:
            if name.endswith(".py"):
                with open(os.path.join(folder, name)) as f:
                    named += [f"{name}:{n}" for n, line in enumerate(f, 1)
                              if "dot_map" in line.lower() or "DotMap" in line]
    assert not named, named


def test_the_example_trains_evaluates_and_its_run_folder_names_its_plugin(trained, synthetic_root, tmp_path):
    stored = (trained / "config.yml").read_text()
    assert "ARCHITECTURE: DOT_MAP" in stored and PROJECT in stored and "TAN:" not in stored
    final = metrics(trained / "inference" / "model_final")
    # its trainer's optimizer (the scale and the biases without weight decay) and its hook's lines
    groups = torch.load(trained / "model_final.pth", weights_only=False)["optimizer"]["param_groups"]
    assert [(len(g["params"]), g["weight_decay"]) for g in groups] == [(3, 1e-4), (4, 0.0)]
    log = (trained / "log.txt").read_text()
    assert all(f"epoch {epoch}: logit scale " in log for epoch in (1, 2, 3))
    # the untrained model, evaluated through the same tool: the trained one must be far better
    proc = run_main("test_net", "--config-file", CONFIG, "DATASETS.ROOT", synthetic_root, "OUTPUT_DIR",
                    str(tmp_path / "untrained"), *SHORT, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    untrained = metrics(tmp_path / "untrained" / "inference" / "untrained")
    assert final["R@1,IoU@0.5"] > untrained["R@1,IoU@0.5"] + 10, (final, untrained)
    # the checkpoint alone (its stored config names the plug-in), from another folder
    proc = run_main("test_net", "--ckpt", str(trained / "model_final.pth"), "DATASETS.ROOT", synthetic_root,
                    "OUTPUT_DIR", str(tmp_path / "again"), cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    again = metrics(tmp_path / "again" / "inference" / "model_final")
    assert {k: v for k, v in again.items() if k != "checkpoint"} == {k: v for k, v in final.items()
                                                                     if k != "checkpoint"}


def test_the_example_predicts_and_draws(trained, synthetic_root, tmp_path):
    with open(os.path.join(synthetic_root, "synthetic", "annotations", "test.json")) as f:
        video = sorted(json.load(f))[0]
    proc = run_main("predict", "--ckpt", str(trained / "model_final.pth"), "--video", video, "--query",
                    "the cook holds the pan.", "--topk", "3", "--json", "DATASETS.ROOT", synthetic_root,
                    cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    moments = json.loads(proc.stdout)["queries"][0]["moments"]
    assert len(moments) == 3 and all(0 <= m["start"] < m["end"] for m in moments)
    pytest.importorskip("matplotlib")
    proc = run_main("visualize", "scores", "--ckpt", str(trained / "model_final.pth"), "--index", "0", "--out",
                    str(tmp_path / "pics"), "DATASETS.ROOT", synthetic_root, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(os.listdir(tmp_path / "pics")) == 1


def test_the_example_resumes_bit_for_bit_after_a_kill(trained, synthetic_root, tmp_path):
    """SIGKILL in epoch 2 (its temperature comes from the model's own hook), then a restart."""
    out = tmp_path / "killed"
    env = dict(os.environ, PYTHONUNBUFFERED="1", **ONE_THREAD)
    with open(tmp_path / "console.txt", "w") as console:
        proc = subprocess.Popen([sys.executable, os.path.join(REPO, "tools", "train_net.py"),
                                 *train_args(synthetic_root, out), "--skip-test"], env=env, stdout=console,
                                stderr=subprocess.STDOUT, cwd=str(tmp_path), start_new_session=True)
    try:
        wait_for_training_record(out, proc, 2, 4)
    finally:
        stop_process_group(proc)  # SIGKILL: nothing saved since the checkpoint of epoch 1
    proc = run_tool("train_net", *train_args(synthetic_root, out), "--skip-test", env=ONE_THREAD, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "resuming" in proc.stdout + proc.stderr
    want, got = final_weights(trained), final_weights(out)
    assert want.keys() == got.keys()
    for name in want:
        assert torch.equal(want[name], got[name]), name


def test_the_example_trains_with_two_processes(synthetic_root, tmp_path):
    out = tmp_path / "ddp"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           os.path.join(REPO, "tools", "train_net.py"),
           *train_args(synthetic_root, out, "SOLVER.MAX_EPOCH", "1", "SOLVER.ITERS_PER_EPOCH", "6")]
    proc = subprocess.run(cmd, env=dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1"), cwd=str(tmp_path),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "using 2 process(es)" in (out / "log.txt").read_text()
    assert (out / "model_final.pth").is_file() and metrics(out / "inference" / "model_final")["R@1,IoU@0.5"] >= 0


def test_the_examples_settings_are_checked_like_the_built_in_ones(synthetic_root, tmp_path):
    from tan.config import load_config
    from tan.errors import TanError
    proc = run_main("train_net", *train_args(synthetic_root, tmp_path / "typo", "MODEL.DOT_MAP.HIDEN_SIZE", "8"))
    assert proc.returncode == 2
    assert "unknown config key 'MODEL.DOT_MAP.HIDEN_SIZE'; did you mean MODEL.DOT_MAP.HIDDEN_SIZE" in proc.stderr
    assert not (tmp_path / "typo").exists()
    with pytest.raises(TanError, match=r"config key MODEL.DOT_MAP.MIN_IOU: need 0 <= MIN_IOU < MAX_IOU"):
        load_config(CONFIG, [*SHORT, "MODEL.DOT_MAP.MIN_IOU", "0.9", "MODEL.DOT_MAP.MAX_IOU", "0.5"])
    # a built-in model's settings in a DOT_MAP run are refused, not ignored
    with pytest.raises(TanError, match=r"config key MODEL.TAN.NUM_CLIPS is set, but MODEL.ARCHITECTURE is 'DOT_MAP'"):
        load_config(CONFIG, [*SHORT, "MODEL.TAN.NUM_CLIPS", "32"])


def test_a_model_that_is_not_registered_gets_the_list_of_those_that_are(synthetic_root, tmp_path):
    from tan.config import load_config
    from tan.errors import TanError
    from tan.modeling import MODELS
    built_in = ", ".join(n for n in MODELS.names() if n != "DOT_MAP")
    # a fresh process, where nothing imported the plug-in
    proc = run_tool("train_net", "--config-file", CONFIG, "PLUGINS", "[]", "DATASETS.ROOT", synthetic_root,
                    "OUTPUT_DIR", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert "MODEL.DOT_MAP holds the settings of a model 'DOT_MAP', and none is registered under that name; " \
           f"registered: {built_in} (a model of a plug-in needs its module in PLUGINS)" in proc.stderr
    assert not (tmp_path / "out").exists()
    with pytest.raises(TanError, match=rf"no model 'DOTMAP' is registered; registered: DOT_MAP, {built_in}"):
        load_config(CONFIG, [*SHORT, "MODEL.ARCHITECTURE", "DOTMAP"])
    with pytest.raises(TanError, match=r"plug-in '.*nowhere.py' not found"):
        load_config(CONFIG, ["PLUGINS", repr([str(tmp_path / "nowhere.py")])])


def test_a_checkpoint_with_the_models_older_names_loads_through_adapt_state_dict(trained, synthetic_root, tmp_path):
    state = final_weights(trained)
    old = {("text_fc." + k[len("sentence."):] if k.startswith("sentence.") else k): v for k, v in state.items()}
    assert any(k.startswith("text_fc.") for k in old)
    torch.save({"model": old}, tmp_path / "first_version.pth")
    proc = run_main("test_net", "--config-file", CONFIG, "--ckpt", str(tmp_path / "first_version.pth"), *SHORT,
                    "DATASETS.ROOT", synthetic_root, "OUTPUT_DIR", str(tmp_path / "eval"), cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = metrics(tmp_path / "eval" / "inference" / "first_version")
    want = metrics(trained / "inference" / "model_final")
    assert {k: v for k, v in got.items() if k != "checkpoint"} == {k: v for k, v in want.items() if k != "checkpoint"}


def test_a_loaded_config_validates_again_and_keeps_its_own_models_keys_only(tmp_path):
    from tan.config import load_config, validate_config
    cfg = load_config(CONFIG, SHORT)
    validate_config(cfg)  # an assembled config holds no other model's keys, and checks again as it is
    assert "DOT_MAP" in cfg.MODEL and "TAN" not in cfg.MODEL and "FREEZE_BERT" not in cfg.SOLVER
    mmn = load_config(os.path.join(REPO, "configs", "mmn_synthetic.yaml"))
    validate_config(mmn)
    assert mmn.SOLVER.FREEZE_BERT == 0 and "TAN" not in mmn.MODEL


def test_a_typo_directly_under_model_still_gets_the_closest_keys():
    from tan.config import load_config
    from tan.errors import TanError
    with pytest.raises(TanError, match=r"unknown config key 'MODEL.NUM_CLIPS'; did you mean MODEL.TAN.NUM_CLIPS"):
        load_config(None, ["MODEL.NUM_CLIPS", "16"])


def test_a_run_folder_whose_plugin_moved_continues_with_the_new_path(tmp_path):
    """config.yml names the plug-in where it was; the new run names where it is: the folder is read
    with the new plug-ins and the change is a runtime one."""
    from tan.engine.run_folder import open_run_folder
    from tan.config import load_config
    out = tmp_path / "out"
    cfg = load_config(CONFIG, [*SHORT, "OUTPUT_DIR", str(out)])
    out.mkdir()
    moved = str(tmp_path / "was_here" / "dot_map")
    (out / "config.yml").write_text(cfg.dump().replace(PROJECT, moved))
    folder = open_run_folder(cfg)
    try:
        assert [(c.key, c.affects_results) for c in folder.changes] == [("PLUGINS", False)]
    finally:
        folder.abandon()
