"""Optimizers and learning-rate schedules, named in the config (docs/training.md).

``SOLVER.OPTIMIZER`` names an optimizer of :data:`OPTIMIZERS` ("" takes the
model's recipe's), ``SOLVER.SCHEDULER`` a schedule of :data:`SCHEDULERS`, and
``SOLVER.WARMUP_ITERS`` / ``SOLVER.WARMUP_FACTOR`` a linear warm-up over the
first steps. A plug-in registers more with :func:`register_optimizer` and
:func:`register_scheduler`. Nothing here reads a model's class: the trainer
passes the model's :class:`~tan.config.models.Recipe` in.
"""
from ..config.models import need
from .optimizers import OPTIMIZERS, build_optimizer, optimizer_name, register_optimizer
from .schedules import (SCHEDULERS, LRSchedule, apply_schedule, build_lr_scheduler, register_scheduler,
                        schedule_keys)

__all__ = ["OPTIMIZERS", "SCHEDULERS", "LRSchedule", "apply_schedule", "build_lr_scheduler", "build_optimizer",
           "check_names", "optimizer_name", "register_optimizer", "register_scheduler", "schedule_keys"]


def check_names(cfg, recipe):
    """SOLVER.OPTIMIZER (or the model's ``recipe``'s) and SOLVER.SCHEDULER name registered ones
    (tan-train checks before it writes anything; the plug-ins, which may register more, are loaded)."""
    name = optimizer_name(cfg, recipe)
    need(name in OPTIMIZERS, "SOLVER.OPTIMIZER",
         f"expected \"\" (the model's own) or one of {', '.join(OPTIMIZERS.names())}, got {cfg.SOLVER.OPTIMIZER!r}"
         if cfg.SOLVER.OPTIMIZER else f"the model's recipe names the optimizer {name!r}, which is not one of "
                                      f"{', '.join(OPTIMIZERS.names())}")
    need(cfg.SOLVER.SCHEDULER in SCHEDULERS, "SOLVER.SCHEDULER",
         f"expected one of {', '.join(SCHEDULERS.names())}, got {cfg.SOLVER.SCHEDULER!r}")
