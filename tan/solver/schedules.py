"""The learning-rate schedules SOLVER.SCHEDULER names, and the linear warm-up.

A schedule is stepped once per epoch, after its last step: epoch e (counted
from 1) trains at the rate the schedule gives after e - 1 steps.

- ``multistep``: SOLVER.LR, times SOLVER.GAMMA after each epoch of
  SOLVER.MILESTONES (torch's MultiStepLR);
- ``cosine``: from SOLVER.LR at epoch 1 down along half a cosine that would
  reach SOLVER.LR x SOLVER.END_LR_FACTOR after SOLVER.MAX_EPOCH epochs.

On top of either, SOLVER.WARMUP_ITERS > 0 scales the rate of the first steps
linearly from SOLVER.WARMUP_FACTOR to 1 (:class:`LRSchedule`). The warm-up is
a function of the step's number alone and the schedule's state is saved in
every checkpoint, so a resumed run trains at the rates of an uninterrupted one.
torch is imported by the builders, so that checking a config does not load it.
"""
import math
from collections import Counter

from ..utils.registry import Registry

SCHEDULERS = Registry("learning-rate schedule (SOLVER.SCHEDULER)")


def register_scheduler(name):
    """Class decorator: a schedule under ``name``. The class gives ``build(cfg, optimizer)`` (a torch
    scheduler stepped once per epoch), ``reschedule(cfg, optimizer, scheduler)`` (a resumed run's
    rates under the config's new values; returns the rate of the epoch in progress) and ``KEYS``,
    the config keys whose accepted change calls for it."""
    return SCHEDULERS.register(name)


def _set_rates(optimizer, scheduler, lr, base):
    """Each group's rate ``lr`` and initial rate ``base`` times its ``lr_scale``, and the scheduler told so."""
    for group in optimizer.param_groups:
        scale = group.get("lr_scale", 1.0)
        group["initial_lr"], group["lr"] = base * scale, lr * scale
    scheduler.base_lrs = [g["initial_lr"] for g in optimizer.param_groups]
    scheduler._last_lr = [g["lr"] for g in optimizer.param_groups]


@register_scheduler("multistep")
class MultiStep:
    KEYS = ("SOLVER.LR", "SOLVER.MILESTONES", "SOLVER.GAMMA")

    @staticmethod
    def build(cfg, optimizer):
        from torch.optim.lr_scheduler import MultiStepLR
        return MultiStepLR(optimizer, milestones=list(cfg.SOLVER.MILESTONES), gamma=cfg.SOLVER.GAMMA)

    @staticmethod
    def reschedule(cfg, optimizer, scheduler):
        """The rate of the epoch in progress becomes SOLVER.LR times SOLVER.GAMMA per milestone
        already passed, and later epochs follow the new milestones."""
        milestones = sorted(cfg.SOLVER.MILESTONES)
        state = scheduler.state_dict()
        passed = sum(1 for m in milestones if m <= state["last_epoch"])
        lr = cfg.SOLVER.LR * cfg.SOLVER.GAMMA ** passed
        _set_rates(optimizer, scheduler, lr, cfg.SOLVER.LR)
        scheduler.milestones, scheduler.gamma = Counter(milestones), cfg.SOLVER.GAMMA
        return lr


class CosineFactor:
    """The cosine's factor of SOLVER.LR after ``steps`` epoch steps (a class, not a closure:
    LambdaLR saves the state of a callable object and restores it on resume)."""

    def __init__(self, epochs, end):
        self.epochs, self.end = epochs, end

    def __call__(self, steps):
        return self.end + (1.0 - self.end) * 0.5 * (1.0 + math.cos(math.pi * min(steps, self.epochs) / self.epochs))


@register_scheduler("cosine")
class Cosine:
    KEYS = ("SOLVER.LR", "SOLVER.MAX_EPOCH", "SOLVER.END_LR_FACTOR")

    @staticmethod
    def build(cfg, optimizer):
        from torch.optim.lr_scheduler import LambdaLR
        return LambdaLR(optimizer, CosineFactor(cfg.SOLVER.MAX_EPOCH, cfg.SOLVER.END_LR_FACTOR))

    @staticmethod
    def reschedule(cfg, optimizer, scheduler):
        factor = CosineFactor(cfg.SOLVER.MAX_EPOCH, cfg.SOLVER.END_LR_FACTOR)
        scheduler.lr_lambdas = [factor] * len(optimizer.param_groups)
        lr = cfg.SOLVER.LR * factor(scheduler.last_epoch)
        _set_rates(optimizer, scheduler, lr, cfg.SOLVER.LR)
        return lr


def build_lr_scheduler(cfg, optimizer):
    """The torch scheduler of SOLVER.SCHEDULER, stepped once per epoch."""
    return SCHEDULERS.get(cfg.SOLVER.SCHEDULER).build(cfg, optimizer)


def schedule_keys(cfg):
    """The keys whose accepted change in a resumed run calls :func:`apply_schedule`."""
    return SCHEDULERS.get(cfg.SOLVER.SCHEDULER).KEYS


def apply_schedule(cfg, optimizer, scheduler):
    """Give a resumed optimizer and scheduler the rates of ``cfg`` (restoring their state
    brought back the old ones); returns the rate of the epoch in progress."""
    return SCHEDULERS.get(cfg.SOLVER.SCHEDULER).reschedule(cfg, optimizer, scheduler)


class LRSchedule:
    """A per-epoch torch scheduler with the linear warm-up of its first ``warmup_iters`` steps.

    The loop calls :meth:`before_step` with the run's step count before each
    step and :meth:`step` after each epoch. During the warm-up a group's rate
    is the scheduler's times a factor rising linearly from ``warmup_factor``
    (step 0) to 1 (step ``warmup_iters``); the scheduler's own rates are put
    back before it steps, so the warm-up never leaks into the schedule. A
    checkpoint holds the scheduler's state alone: the warm-up follows from the
    step count."""

    def __init__(self, scheduler, warmup_iters=0, warmup_factor=1.0):
        self.scheduler, self.warmup_iters, self.warmup_factor = scheduler, warmup_iters, warmup_factor
        self.optimizer = scheduler.optimizer
        self.scaled = False  # the groups' rates are the warm-up's, not the scheduler's
        # The first step writes the rates whatever the warm-up: a run resumed from a checkpoint saved in the
        # warm-up, with a shorter one or none, must not keep the lowered rates its optimizer state holds.
        self.started = False

    @classmethod
    def from_config(cls, cfg, scheduler):
        return cls(scheduler, cfg.SOLVER.WARMUP_ITERS, cfg.SOLVER.WARMUP_FACTOR)

    def warmup(self, iteration):
        """The warm-up's factor for the step after ``iteration`` steps (1 once it is over)."""
        if iteration >= self.warmup_iters:
            return 1.0
        return self.warmup_factor + (1.0 - self.warmup_factor) * iteration / self.warmup_iters

    def before_step(self, iteration):
        if self.started and (not self.warmup_iters or iteration > self.warmup_iters):  # the scheduler's rates stand
            return
        self.started = True
        factor = self.warmup(iteration)
        for group, lr in zip(self.optimizer.param_groups, self.scheduler.get_last_lr()):
            group["lr"] = lr * factor
        self.scaled = factor != 1.0

    def step(self):
        if self.scaled:
            for group, lr in zip(self.optimizer.param_groups, self.scheduler.get_last_lr()):
                group["lr"] = lr
            self.scaled = False
        self.scheduler.step()
