"""Optimizer and learning-rate schedule (docs/model.md §7)."""
from collections import Counter

import torch


def build_optimizer(cfg, model):
    params = list(model.parameters())
    # One fused kernel for all parameters on CUDA (it also lets an fp16 gradient
    # scaler skip its per-step host sync); the multi-tensor path elsewhere.
    # Both compute Adam exactly as the plain loop does, up to rounding.
    on_cuda = all(p.is_cuda for p in params)
    return torch.optim.Adam(params, lr=cfg.SOLVER.LR, fused=on_cuda or None, foreach=None if on_cuda else True)


def build_lr_scheduler(cfg, optimizer):
    # Stepped once per epoch: the rate drops tenfold after each milestone epoch.
    return torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=list(cfg.SOLVER.MILESTONES), gamma=0.1)


# The config keys that define the learning rate of every epoch.
SCHEDULE_KEYS = ("SOLVER.LR", "SOLVER.MILESTONES")


def apply_schedule(cfg, optimizer, scheduler):
    """Give a resumed optimizer and scheduler the learning rate and milestones of
    ``cfg`` (restoring their state brought back the old ones): the rate of the
    epoch in progress becomes SOLVER.LR times 0.1 per milestone already passed,
    and later epochs follow the new milestones."""
    milestones = sorted(cfg.SOLVER.MILESTONES)
    state = scheduler.state_dict()
    passed = sum(1 for m in milestones if m <= state["last_epoch"])
    lr = cfg.SOLVER.LR * state["gamma"] ** passed
    for group in optimizer.param_groups:
        group["initial_lr"], group["lr"] = cfg.SOLVER.LR, lr
    state.update(base_lrs=[cfg.SOLVER.LR] * len(optimizer.param_groups), milestones=Counter(milestones),
                 _last_lr=[lr] * len(optimizer.param_groups))
    scheduler.load_state_dict(state)
    return lr
