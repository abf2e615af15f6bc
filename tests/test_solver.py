"""Optimizers and learning-rate schedules named in the config: what each builds, the rate of every
epoch and step (warm-up included), the same rates after a restore from saved state, and the
refusal of names and values that cannot work."""
import math
import os

import pytest
import torch

from tan.config import load_config
from tan.config.models import Recipe
from tan.errors import TanError
from tan.modeling import build_model
from tan.solver import (LRSchedule, OPTIMIZERS, SCHEDULERS, apply_schedule, build_lr_scheduler, build_optimizer,
                        check_names)

from conftest import REPO, SYNTHETIC_CONFIG

MMN_SYNTHETIC_CONFIG = os.path.join(REPO, "configs", "mmn_synthetic.yaml")
# the schedules are stepped here without optimisation steps between, which torch warns about
pytestmark = pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before")


def built(*opts, config=SYNTHETIC_CONFIG):
    cfg = load_config(config, list(opts))
    torch.manual_seed(0)
    model = build_model(cfg)
    optimizer = build_optimizer(cfg, model, model.recipe(cfg))
    return cfg, model, optimizer, LRSchedule.from_config(cfg, build_lr_scheduler(cfg, optimizer))


def rates(optimizer, schedule, epochs, steps_per_epoch, start=0):
    """The rate of every step of ``epochs`` epochs, as the loop sets it (step counts from ``start``)."""
    seen, iteration = [], start
    for _ in range(epochs):
        for _ in range(steps_per_epoch):
            schedule.before_step(iteration)
            seen.append([g["lr"] for g in optimizer.param_groups])
            iteration += 1
        schedule.step()
    return seen


def test_the_registries_hold_the_documented_names():
    assert {"adam", "adamw", "sgd"} <= set(OPTIMIZERS.names())
    assert {"multistep", "cosine"} <= set(SCHEDULERS.names())


def test_an_empty_optimizer_takes_the_model_s_own_and_a_name_overrides_it():
    _, _, optimizer, _ = built()
    assert type(optimizer) is torch.optim.Adam  # 2D-TAN's recipe
    _, _, optimizer, _ = built(config=MMN_SYNTHETIC_CONFIG)
    assert type(optimizer) is torch.optim.AdamW  # MMN's recipe, with its betas and weight decay
    assert optimizer.param_groups[0]["betas"] == (0.9, 0.99) and optimizer.param_groups[0]["weight_decay"] == 1e-5
    cfg, model, optimizer, _ = built("SOLVER.OPTIMIZER", "sgd", "SOLVER.MOMENTUM", "0.8", "SOLVER.LR", "0.05")
    assert type(optimizer) is torch.optim.SGD
    assert [(g["lr"], g["momentum"], g["weight_decay"]) for g in optimizer.param_groups] == [(0.05, 0.8, 0)]
    # MMN's groups keep their own rates (lr_scale) under another optimizer
    _, model, optimizer, _ = built("SOLVER.OPTIMIZER", "adam", config=MMN_SYNTHETIC_CONFIG)
    cfg = load_config(MMN_SYNTHETIC_CONFIG, [])
    assert type(optimizer) is torch.optim.Adam
    assert [g["lr"] for g in optimizer.param_groups] == [cfg.SOLVER.LR * g["lr_scale"]
                                                         for g in model.parameter_groups()]


def test_sgd_takes_a_recipe_s_weight_decay():
    cfg = load_config(SYNTHETIC_CONFIG, ["SOLVER.OPTIMIZER", "sgd"])
    optimizer = build_optimizer(cfg, build_model(cfg), Recipe("adam", weight_decay=1e-4))
    assert optimizer.param_groups[0]["weight_decay"] == 1e-4


def test_multistep_lowers_the_rate_by_gamma_after_each_milestone_epoch():
    _, _, optimizer, schedule = built("SOLVER.LR", "0.01", "SOLVER.MILESTONES", "(2, 3)", "SOLVER.GAMMA", "0.5")
    per_epoch = [r[0] for r in rates(optimizer, schedule, 4, 3)][::3]
    assert per_epoch == pytest.approx([0.01, 0.01, 0.005, 0.0025])


def test_cosine_follows_half_a_cosine_towards_its_end_factor_over_max_epoch():
    _, _, optimizer, schedule = built("SOLVER.SCHEDULER", "cosine", "SOLVER.LR", "0.02", "SOLVER.MAX_EPOCH", "4",
                                      "SOLVER.END_LR_FACTOR", "0.1")
    per_epoch = [r[0] for r in rates(optimizer, schedule, 4, 2)][::2]
    want = [0.002 + 0.018 * 0.5 * (1 + math.cos(math.pi * e / 4)) for e in range(4)]
    assert per_epoch == pytest.approx(want, rel=1e-12)


def test_the_warm_up_rises_linearly_over_its_steps_then_leaves_the_schedule_as_it_was():
    """Eight warm-up steps over epochs of three with a milestone after epoch 1: the milestone's tenfold
    drop applies to the schedule's rate, not to the warm-up's lowered one."""
    opts = ["SOLVER.LR", "0.01", "SOLVER.MILESTONES", "(1,)", "SOLVER.WARMUP_ITERS", "8",
            "SOLVER.WARMUP_FACTOR", "0.2"]
    _, _, optimizer, schedule = built(*opts)
    got = [r[0] for r in rates(optimizer, schedule, 4, 3)]
    schedule_rate = [0.01] * 3 + [0.001] * 9
    want = [lr * (0.2 + 0.8 * i / 8 if i < 8 else 1.0) for i, lr in enumerate(schedule_rate)]
    assert got == pytest.approx(want, rel=1e-12)
    # without a warm-up the same schedule
    _, _, optimizer, schedule = built(*opts[:4])
    assert [r[0] for r in rates(optimizer, schedule, 4, 3)] == pytest.approx(schedule_rate, rel=1e-12)


@pytest.mark.parametrize("opts", [["SOLVER.OPTIMIZER", "sgd", "SOLVER.MILESTONES", "(2,)"],
                                  ["SOLVER.SCHEDULER", "cosine", "SOLVER.MAX_EPOCH", "5"],
                                  ["SOLVER.WARMUP_ITERS", "7", "SOLVER.MILESTONES", "(1, 3)"]],
                         ids=["sgd", "cosine", "warm-up"])
def test_rates_after_a_restore_mid_epoch_are_those_of_an_uninterrupted_run(opts):
    """What a checkpoint keeps (the optimizer's and the scheduler's state) restores the rates of every
    later step, the warm-up's included, when the run stops in the middle of an epoch."""
    _, _, optimizer, schedule = built(*opts)
    straight = rates(optimizer, schedule, 5, 4)
    _, _, optimizer, schedule = built(*opts)
    first = rates(optimizer, schedule, 1, 4)
    for i in range(4, 6):  # two steps of epoch 2, then the stop
        schedule.before_step(i)
        first.append([g["lr"] for g in optimizer.param_groups])
    saved = optimizer.state_dict(), schedule.scheduler.state_dict()
    _, _, optimizer, schedule = built(*opts)
    optimizer.load_state_dict(saved[0])
    schedule.scheduler.load_state_dict(saved[1])
    rest = []
    for i in range(6, 8):
        schedule.before_step(i)
        rest.append([g["lr"] for g in optimizer.param_groups])
    schedule.step()
    rest += rates(optimizer, schedule, 3, 4, start=8)
    assert first + rest == straight


def test_an_accepted_rate_change_reschedules_a_cosine_from_the_epoch_in_progress():
    cfg, _, optimizer, schedule = built("SOLVER.SCHEDULER", "cosine", "SOLVER.MAX_EPOCH", "4", "SOLVER.LR", "0.01")
    rates(optimizer, schedule, 2, 1)
    changed = load_config(SYNTHETIC_CONFIG, ["SOLVER.SCHEDULER", "cosine", "SOLVER.MAX_EPOCH", "4", "SOLVER.LR",
                                             "0.04"])
    lr = apply_schedule(changed, optimizer, schedule.scheduler)
    assert lr == pytest.approx(0.04 * 0.5 * (1 + math.cos(math.pi * 2 / 4)))
    assert optimizer.param_groups[0]["lr"] == lr
    schedule.step()
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.04 * 0.5 * (1 + math.cos(math.pi * 3 / 4)))


def test_an_accepted_milestone_and_gamma_change_reschedules_a_multistep():
    _, _, optimizer, schedule = built("SOLVER.MILESTONES", "(1, 4)", "SOLVER.LR", "0.01")
    rates(optimizer, schedule, 2, 1)  # after epochs 1 and 2: one milestone passed
    changed = load_config(SYNTHETIC_CONFIG, ["SOLVER.MILESTONES", "(1, 3)", "SOLVER.LR", "0.01", "SOLVER.GAMMA",
                                             "0.5"])
    assert apply_schedule(changed, optimizer, schedule.scheduler) == pytest.approx(0.005)
    schedule.step()
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.0025)


def test_a_name_no_plug_in_registered_is_refused_naming_the_key():
    cfg = load_config(SYNTHETIC_CONFIG, ["SOLVER.OPTIMIZER", "lamb"])
    with pytest.raises(TanError, match=r"SOLVER.OPTIMIZER: expected \"\" \(the model's own\) or one of adam, "
                                       r"adamw, sgd, got 'lamb'"):
        check_names(cfg, Recipe())
    with pytest.raises(TanError, match=r"SOLVER.OPTIMIZER: the model's recipe names the optimizer 'lion'"):
        check_names(load_config(SYNTHETIC_CONFIG, []), Recipe("lion"))
    with pytest.raises(TanError, match=r"SOLVER.SCHEDULER: expected one of cosine, multistep, got 'step'"):
        check_names(load_config(SYNTHETIC_CONFIG, ["SOLVER.SCHEDULER", "step"]), Recipe())
    check_names(load_config(SYNTHETIC_CONFIG, ["SOLVER.OPTIMIZER", "sgd", "SOLVER.SCHEDULER", "cosine"]), Recipe())


@pytest.mark.parametrize("key,value,message", [
    ("SOLVER.WARMUP_ITERS", "-1", r"SOLVER.WARMUP_ITERS: expected a whole number >= 0"),
    ("SOLVER.WARMUP_FACTOR", "0.0", r"SOLVER.WARMUP_FACTOR: expected a factor in \(0, 1\]"),
    ("SOLVER.GAMMA", "0.0", r"SOLVER.GAMMA: expected a positive factor"),
    ("SOLVER.END_LR_FACTOR", "2.0", r"SOLVER.END_LR_FACTOR: expected a fraction in \[0, 1\]"),
    ("SOLVER.MOMENTUM", "-0.5", r"SOLVER.MOMENTUM: expected a value >= 0"),
])
def test_a_value_that_cannot_work_is_refused_naming_the_key(key, value, message):
    with pytest.raises(TanError, match=message):
        load_config(SYNTHETIC_CONFIG, [key, value])


def test_a_run_resumed_in_its_warm_up_with_a_shorter_one_or_none_trains_at_the_schedule_s_rates():
    """The checkpoint's optimizer holds the warm-up's lowered rates; an accepted WARMUP_ITERS 0 (or one
    already over) puts the schedule's back at the first step, and a milestone then lowers those."""
    opts = ["SOLVER.LR", "0.01", "SOLVER.MILESTONES", "(2,)"]
    _, _, optimizer, schedule = built(*opts, "SOLVER.WARMUP_ITERS", "10")
    rates(optimizer, schedule, 1, 3)
    schedule.before_step(3)  # a step of epoch 2, then the stop
    assert optimizer.param_groups[0]["lr"] < 0.01
    saved = optimizer.state_dict(), schedule.scheduler.state_dict()
    for warmup in ("0", "3"):
        _, _, optimizer, schedule = built(*opts, "SOLVER.WARMUP_ITERS", warmup)
        optimizer.load_state_dict(saved[0])
        schedule.scheduler.load_state_dict(saved[1])
        rest = [r[0] for r in rates(optimizer, schedule, 2, 3, start=4)]
        assert rest == pytest.approx([0.01] * 3 + [0.001] * 3, rel=1e-12), warmup
