"""Optimizer and learning-rate schedule (docs/model.md §7)."""
from collections import Counter

import torch

from .config.models import OPTIMIZERS, model_class
from .errors import TanError


def build_optimizer(cfg, model):
    """The optimizer of the model's recipe (``recipe(cfg)``: Adam or AdamW, with
    their settings) over its ``parameter_groups()``. Each group's rate is
    SOLVER.LR times its ``lr_scale``."""
    recipe = model_class(cfg).recipe(cfg)
    if recipe.optimizer not in OPTIMIZERS:
        raise TanError(f"model {cfg.MODEL.ARCHITECTURE!r}: its recipe's optimizer {recipe.optimizer!r} is not one "
                         f"of {', '.join(OPTIMIZERS)}")
    groups = model.parameter_groups()
    for group in groups:
        group["lr"] = cfg.SOLVER.LR * group["lr_scale"]
    params = [p for g in groups for p in g["params"]]
    # One fused kernel for all parameters on CUDA (it also lets an fp16 gradient
    # scaler skip its per-step host sync); the multi-tensor path elsewhere.
    # Both compute the update exactly as the plain loop does, up to rounding.
    on_cuda = all(p.is_cuda for p in params)
    fast = dict(fused=on_cuda or None, foreach=None if on_cuda else True)
    options = {k: v for k, v in (("betas", recipe.betas), ("weight_decay", recipe.weight_decay)) if v is not None}
    optimizer = torch.optim.AdamW if recipe.optimizer == "adamw" else torch.optim.Adam
    return optimizer(groups, lr=cfg.SOLVER.LR, **options, **fast)


def build_lr_scheduler(cfg, optimizer):
    # Stepped once per epoch: the rate drops tenfold after each milestone epoch.
    return torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=list(cfg.SOLVER.MILESTONES), gamma=0.1)


# The config keys that define the learning rate of every epoch.
SCHEDULE_KEYS = ("SOLVER.LR", "SOLVER.MILESTONES")


def apply_schedule(cfg, optimizer, scheduler):
    """Give a resumed optimizer and scheduler the learning rate and milestones of
    ``cfg`` (restoring their state brought back the old ones): the rate of the
    epoch in progress becomes SOLVER.LR times 0.1 per milestone already passed
    (times each group's ``lr_scale``), and later epochs follow the new milestones."""
    milestones = sorted(cfg.SOLVER.MILESTONES)
    state = scheduler.state_dict()
    passed = sum(1 for m in milestones if m <= state["last_epoch"])
    lr = cfg.SOLVER.LR * state["gamma"] ** passed
    for group in optimizer.param_groups:
        scale = group.get("lr_scale", 1.0)
        group["initial_lr"], group["lr"] = cfg.SOLVER.LR * scale, lr * scale
    state.update(base_lrs=[g["initial_lr"] for g in optimizer.param_groups], milestones=Counter(milestones),
                 _last_lr=[g["lr"] for g in optimizer.param_groups])
    scheduler.load_state_dict(state)
    return lr
