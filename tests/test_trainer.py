"""The Trainer through tan-train: SGD, the cosine schedule and the warm-up each train, log the
rates they promise and, stopped in the middle of an epoch, resume to the weights of an
uninterrupted run; a resumed run cannot swap its optimizer; an unknown TRAINER, and what a
subclass's check_config refuses, is refused before anything is written, in tan-train and in a
script of its own that sets its trainer up."""
import json
import math
import os
import signal
import subprocess
import sys

import pytest
import torch

from tan.engine import Trainer, register_trainer
from tan.errors import TanError

from conftest import ONE_THREAD, REPO, SYNTHETIC_CONFIG, run_main, run_tool, with_overrides
from runs import final_weights, signal_after_record

pytestmark = pytest.mark.slow

RUN = ["MODEL.DEVICE", "cpu", "DATALOADER.NUM_WORKERS", "0", "SOLVER.LOG_PERIOD", "2", "SOLVER.TEST_PERIOD", "0",
       "SOLVER.MAX_EPOCH", "3", "SOLVER.ITERS_PER_EPOCH", "8", "SOLVER.MILESTONES", "(2,)"]
SETTINGS = {
    "sgd": ["SOLVER.OPTIMIZER", "sgd", "SOLVER.LR", "0.05", "SOLVER.MOMENTUM", "0.9"],
    "cosine": ["SOLVER.SCHEDULER", "cosine", "SOLVER.END_LR_FACTOR", "0.1"],
    "warm-up": ["SOLVER.WARMUP_ITERS", "12", "SOLVER.WARMUP_FACTOR", "0.1"],
}


def args(root, out, setting, *extra):
    return ["--config-file", SYNTHETIC_CONFIG,
            *with_overrides(["DATASETS.ROOT", root, "OUTPUT_DIR", str(out), *RUN, *SETTINGS[setting]], *extra),
            "--skip-test"]


def logged_rates(out):
    """(epoch, iteration in the epoch) -> the rate metrics.jsonl logged there."""
    with open(os.path.join(out, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f]
    return {(r["epoch"], r["iter"]): r["lr"] for r in records if "iter" in r and "lr" in r}


def expected_rate(setting, epoch, it):
    """The rate of step ``it`` (from 1) of ``epoch`` (from 1), as docs/training.md ("Optimizer, schedule and warm-up") defines it."""
    if setting == "sgd":
        return 0.05 * (0.1 if epoch > 2 else 1.0)
    if setting == "cosine":
        return 0.001 * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (epoch - 1) / 3)))
    done = (epoch - 1) * 8 + it - 1  # steps before this one
    return 0.001 * (0.1 if epoch > 2 else 1.0) * (0.1 + 0.9 * done / 12 if done < 12 else 1.0)


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_a_setting_trains_at_its_rates_and_resumes_from_mid_epoch_to_the_uninterrupted_weights(setting,
                                                                                             synthetic_root,
                                                                                             tmp_path):
    straight = tmp_path / "straight"
    proc = run_tool("train_net", *args(synthetic_root, straight, setting), env=ONE_THREAD)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rates = logged_rates(straight)
    assert len(rates) == 12  # every second step of 3 epochs of 8
    for (epoch, it), lr in rates.items():
        assert lr == pytest.approx(expected_rate(setting, epoch, it), rel=1e-6), (epoch, it)
    checkpoint = torch.load(straight / "model_final.pth", weights_only=False)
    optimizer = checkpoint["optimizer"]
    if setting == "sgd":
        assert all("momentum_buffer" in s for s in optimizer["state"].values())
    else:
        assert all("exp_avg" in s for s in optimizer["state"].values())  # 2D-TAN's own: Adam

    # SIGTERM after step 2 of epoch 2 (in the warm-up, for the warm-up): saved there, then resumed
    stopped = tmp_path / "stopped"
    env = dict(os.environ, PYTHONUNBUFFERED="1", **ONE_THREAD)
    with open(tmp_path / "console.txt", "w") as console:
        proc = subprocess.Popen([sys.executable, os.path.join(REPO, "tools", "train_net.py"),
                                 *args(synthetic_root, stopped, setting)], env=env, stdout=console,
                                stderr=subprocess.STDOUT, start_new_session=True)
    assert signal_after_record(stopped, proc, epoch=2, it=2) == 128 + signal.SIGTERM
    assert [n for n in os.listdir(stopped) if n.startswith("model_2e_")]
    proc = run_tool("train_net", *args(synthetic_root, stopped, setting), env=ONE_THREAD)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "resuming epoch 2 after iteration" in proc.stdout
    want, got = final_weights(straight), final_weights(stopped)
    assert want.keys() == got.keys()
    for name in want:
        assert torch.equal(want[name], got[name]), name
    assert logged_rates(stopped) == rates


@pytest.mark.parametrize("change,refused", [
    (["SOLVER.OPTIMIZER", "sgd"], "SOLVER.OPTIMIZER: '' -> 'sgd'"),
    (["SOLVER.SCHEDULER", "multistep"], "SOLVER.SCHEDULER: 'cosine' -> 'multistep'"),
    (["TRAINER", "COUNTING"], "TRAINER: 'default' -> 'COUNTING'"),
])
def test_a_folder_with_checkpoints_cannot_swap_its_optimizer_schedule_or_trainer(change, refused, synthetic_root,
                                                                                  tmp_path):
    out = tmp_path / "run"
    proc = run_main("train_net", *args(synthetic_root, out, "cosine", "SOLVER.MAX_EPOCH", "1"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    before = {name: (out / name).read_bytes() for name in ("config.yml", "model_final.pth", "last_checkpoint")}
    proc = run_main("train_net", *args(synthetic_root, out, "cosine", "SOLVER.MAX_EPOCH", "2", *change,
                                       "--accept-config-changes"))
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2, output[-3000:]
    assert refused in output and "cannot change within the run (nothing was changed)" in output
    assert {name: (out / name).read_bytes() for name in before} == before
    assert not (out / "model_2e.pth").exists()


def test_an_accepted_momentum_holds_and_naming_the_optimizer_a_model_already_uses_is_no_change(synthetic_root,
                                                                                               tmp_path):
    out = tmp_path / "run"
    proc = run_main("train_net", *args(synthetic_root, out, "sgd", "SOLVER.MAX_EPOCH", "1"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = run_main("train_net", *args(synthetic_root, out, "sgd", "SOLVER.MAX_EPOCH", "2", "SOLVER.MOMENTUM", "0.5",
                                       "--accept-config-changes"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    groups = torch.load(out / "model_final.pth", weights_only=False)["optimizer"]["param_groups"]
    assert [g["momentum"] for g in groups] == [0.5]
    # 2D-TAN's own optimizer is Adam: SOLVER.OPTIMIZER "" -> "adam" changes nothing and continues
    adam = tmp_path / "adam"
    proc = run_main("train_net", *args(synthetic_root, adam, "cosine", "SOLVER.MAX_EPOCH", "1"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = run_main("train_net", *args(synthetic_root, adam, "cosine", "SOLVER.MAX_EPOCH", "2", "SOLVER.OPTIMIZER",
                                       "adam", "--accept-config-changes"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (adam / "model_2e.pth").is_file()


@register_trainer("COUNTING")
class CountingTrainer(Trainer):
    """Records which of its build methods the run called."""
    called = []

    def build_test_loaders(self):
        CountingTrainer.called.append("build_test_loaders")
        return super().build_test_loaders()

    def build_hooks(self):
        CountingTrainer.called.append("build_hooks")
        return super().build_hooks()


def test_a_subclass_s_build_methods_are_what_the_run_uses(synthetic_root, tmp_path):
    CountingTrainer.called.clear()
    run = [a for a in args(synthetic_root, tmp_path / "out", "cosine", "SOLVER.MAX_EPOCH", "1", "TRAINER", "COUNTING")
           if a != "--skip-test"]
    proc = run_main("train_net", *run)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert CountingTrainer.called == ["build_hooks", "build_test_loaders"]
    assert (tmp_path / "out" / "inference" / "model_final" / "synthetic_test" / "metrics.json").is_file()


@pytest.mark.parametrize("key,value,message", [
    ("TRAINER", "mine", "unknown trainer (TRAINER) 'mine'; registered: "),
    ("SOLVER.OPTIMIZER", "lamb", "config key SOLVER.OPTIMIZER: expected \"\" (the model's own) or one of adam"),
    ("SOLVER.SCHEDULER", "onecycle", "config key SOLVER.SCHEDULER: expected one of cosine, multistep, got 'onecycle'"),
])
def test_a_name_nothing_registered_is_refused_before_anything_is_written(key, value, message, synthetic_root,
                                                                         tmp_path):
    out = tmp_path / "never"
    proc = run_main("train_net", *args(synthetic_root, out, "sgd", key, value))
    assert proc.returncode == 2
    assert message in proc.stderr
    if key == "TRAINER":  # tan's own at least (a plug-in imported by another test may have added more)
        assert "default" in proc.stderr.split(message, 1)[1].strip().split(", ")
    assert not out.exists()


@register_trainer("NEEDS_MOMENTUM")
class NeedsMomentumTrainer(Trainer):
    """Refuses at set-up what it cannot train, as a subclass reading a key of its own would."""
    seen = []

    @classmethod
    def check_config(cls, cfg, declared):
        super().check_config(cfg, declared)
        cls.seen.append(declared.recipe.optimizer)
        if cfg.SOLVER.MOMENTUM < 0.5:
            raise TanError(f"config key SOLVER.MOMENTUM: this trainer needs 0.5 or more, got {cfg.SOLVER.MOMENTUM}")


def test_a_subclass_s_check_config_refuses_before_anything_is_written(synthetic_root, tmp_path):
    NeedsMomentumTrainer.seen.clear()
    out = tmp_path / "never"
    proc = run_main("train_net", *args(synthetic_root, out, "sgd", "TRAINER", "NEEDS_MOMENTUM",
                                       "SOLVER.MOMENTUM", "0.1"))
    assert proc.returncode == 2
    assert "config key SOLVER.MOMENTUM: this trainer needs 0.5 or more, got 0.1" in proc.stderr
    assert NeedsMomentumTrainer.seen == ["adam"]  # asked with the model's declarations: 2D-TAN's recipe is Adam
    assert not out.exists()
    # the base class's own refusals come first: the subclass is not asked
    NeedsMomentumTrainer.seen.clear()
    proc = run_main("train_net", *args(synthetic_root, out, "sgd", "TRAINER", "NEEDS_MOMENTUM",
                                       "SOLVER.MOMENTUM", "0.1", "SOLVER.SCHEDULER", "onecycle"))
    assert proc.returncode == 2 and "SOLVER.SCHEDULER: expected one of" in proc.stderr
    assert "SOLVER.MOMENTUM" not in proc.stderr and NeedsMomentumTrainer.seen == []
    assert not out.exists()


OWN_SCRIPT = '''
import argparse, sys
import tan_apps.synthetic  # registers the synthetic dataset's generator, as the tan commands do
from tan.config import load_config
from tan.engine import Trainer
from tan.errors import TanError

class OneEpochTrainer(Trainer):  # not registered: the script names the class itself
    @classmethod
    def check_config(cls, cfg, declared):
        super().check_config(cfg, declared)
        if cfg.SOLVER.MAX_EPOCH != 1:
            raise TanError(f"config key SOLVER.MAX_EPOCH: this script trains 1 epoch, got {cfg.SOLVER.MAX_EPOCH}")

class BrokenTrainer(OneEpochTrainer):
    def __init__(self, run):
        raise RuntimeError("a trainer that cannot be made")

args = argparse.Namespace(config_file=sys.argv[1], local_rank=None)
cfg = load_config(sys.argv[1], sys.argv[2:])
try:
    BrokenTrainer.set_up(cfg, args)
except RuntimeError as e:
    print("not made:", e)  # the folder set up for it is given back
except TanError as e:
    sys.exit(f"refused: {e}")
with OneEpochTrainer.set_up(cfg, args) as trainer:
    print("trained", trainer.train())
with OneEpochTrainer.set_up(cfg, args) as trainer:  # the first gave the folder back: it can be set up again
    print("again", trainer.train())
'''


def test_a_script_of_its_own_sets_its_trainer_up_refusing_before_anything_is_written(synthetic_root, tmp_path):
    script = tmp_path / "train_mine.py"
    script.write_text(OWN_SCRIPT)
    out = tmp_path / "out"
    overrides = with_overrides(["DATASETS.ROOT", synthetic_root, "OUTPUT_DIR", str(out), *RUN], "SOLVER.MAX_EPOCH", "2")

    def run(*extra):
        return subprocess.run([sys.executable, str(script), SYNTHETIC_CONFIG, *with_overrides(overrides, *extra)],
                              cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO, **ONE_THREAD), text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    proc = run()
    assert proc.returncode == 1
    assert "refused: config key SOLVER.MAX_EPOCH: this script trains 1 epoch, got 2" in proc.stderr
    assert not out.exists()
    proc = run("SOLVER.MAX_EPOCH", "1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    final = os.path.join(str(out), "model_final.pth")
    lines = proc.stdout.splitlines()
    assert "not made: a trainer that cannot be made" in lines
    assert f"trained {final}" in lines and lines[-1] == f"again {final}"
    assert f"{final} exists and holds all 1 epochs: nothing to train" in proc.stdout
    assert (out / "model_final.pth").is_file()


class ReturnsNothing(Trainer):
    """A build method a user forgot to finish: it returns None."""
    method = None

    def build_optimizer(self, model):
        return None if self.method == "build_optimizer" else super().build_optimizer(model)

    def build_scheduler(self, optimizer):
        if self.method == "plateau":
            return torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer)
        return None if self.method == "build_scheduler" else super().build_scheduler(optimizer)

    def build_checkpointer(self, model, optimizer, scheduler, grad_scaler):
        built = super().build_checkpointer(model, optimizer, scheduler, grad_scaler)
        return "checkpoints/" if self.method == "build_checkpointer" else built

    def build_train_loader(self):
        if self.method == "plain_loader":  # a torch DataLoader the loop cannot resume mid-epoch
            return torch.utils.data.DataLoader(super().build_train_loader().dataset)
        return None if self.method == "build_train_loader" else super().build_train_loader()

    def build_hooks(self):
        hooks = super().build_hooks()
        return hooks + [object()] if self.method == "build_hooks" else hooks


@pytest.mark.parametrize("method,returned,expected", [
    ("build_optimizer", "None", "a torch.optim.Optimizer over the model's parameters"),
    ("build_scheduler", "None", "a torch.optim.lr_scheduler scheduler"),
    ("build_checkpointer", "a builtins.str", "a tan.engine.checkpoints.Checkpointer"),
    ("build_train_loader", "None", "a loader of the run's data, as self.data's loaders are"),
    ("build_hooks", "a list whose item 4 is a builtins.object, which has no before_train", "tan.engine.HookBase"),
    ("plateau", "a ReduceLROnPlateau, which steps on a metric", "return a scheduler of the epoch"),
    ("plain_loader", "a torch.utils.data.dataloader.DataLoader, which has no sampler.resume",
     "a loader of the run's data, as self.data's loaders are"),
])
def test_a_build_method_returning_the_wrong_thing_is_named_in_one_line(method, returned, expected, synthetic_root,
                                                                         tmp_path):
    name = f"RETURNS_NOTHING_{method.upper()}"
    if name not in __import__("tan.engine.trainer", fromlist=["TRAINERS"]).TRAINERS:
        register_trainer(name)(type(name, (ReturnsNothing,), {"method": method}))
    proc = run_main("train_net", *args(synthetic_root, tmp_path / "out", "sgd", "TRAINER", name))
    assert proc.returncode == 2, proc.stderr[-3000:]
    [line] = [line for line in (proc.stdout + proc.stderr).splitlines() if " ERROR: " in line]  # logging is on
    called = {"plateau": "build_scheduler", "plain_loader": "build_train_loader"}.get(method, method)
    assert f"{name}.{called}() returned {returned}" in line and expected in line, line
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not (tmp_path / "out").exists()  # refused before a step: the folder it made is taken back


def test_the_final_weights_are_evaluated_once_on_a_dataset_validated_and_tested(synthetic_root, tmp_path):
    """DATASETS.VAL and DATASETS.TEST the same (as the Ego4D NLQ configs): the last epoch's
    validation evaluates the final weights, and the test writes its results for model_final (and for
    model_best when the best epoch is the last) without evaluating them again."""
    out = tmp_path / "out"
    run = [a for a in args(synthetic_root, out, "cosine", "SOLVER.TEST_PERIOD", "1", "SOLVER.MAX_EPOCH", "2",
                           "DATASETS.VAL", "('synthetic_test',)") if a != "--skip-test"]
    proc = run_tool("train_net", *run, env=ONE_THREAD)
    assert proc.returncode == 0, proc.stdout[-3000:]
    best = torch.load(out / "model_best.pth", weights_only=False)["best"]
    # one validation per epoch; the best model evaluated again only if it is not the final one
    assert proc.stdout.count("evaluating on synthetic_test") == 2 + (best["epoch"] != 2)
    assert proc.stdout.count("not computed again") == 1 + (best["epoch"] == 2)
    with open(out / "metrics.jsonl") as f:
        validations = {r["epoch"]: r for r in map(json.loads, f) if "dataset" in r}
    assert sorted(validations) == [1, 2]
    for folder, epoch in (("model_final", 2), ("model_best", best["epoch"])):
        with open(out / "inference" / folder / "synthetic_test" / "metrics.json") as f:
            written = json.load(f)
        assert written["checkpoint"] == str(out / f"{folder}.pth")
        validated = {k: v for k, v in validations[epoch].items() if k not in ("epoch", "dataset")}
        assert {k: written[k] for k in validated} == validated
        assert (out / "inference" / folder / "synthetic_test" / "predictions.jsonl").is_file()
