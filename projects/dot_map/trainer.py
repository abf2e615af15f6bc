"""DOT_MAP's trainer: tan's own with two changes of the kind a project makes
(docs/training.md, "A trainer of your own").

- Its optimizer leaves the logit scale and the biases out of the weight decay,
  which would otherwise pull the scale towards zero: two parameter groups for
  the optimizer the config names (SOLVER.OPTIMIZER; "" is the model's AdamW).
- A hook logs the learnt logit scale after every epoch.

Registered as "DOT_MAP"; dot_map_synthetic.yaml picks it with ``TRAINER: "DOT_MAP"``.
"""
from tan.engine import HookBase, Trainer, register_trainer, unwrap
from tan.solver import build_optimizer
from tan.utils import comm
from tan.utils.logger import get_logger


class LogitScaleLog(HookBase):
    """After each epoch, rank 0 writes the model's logit scale to the log."""

    def __init__(self, model):
        self.model = model

    def after_epoch(self, state, epoch):
        if comm.is_main_process():
            get_logger("train").info("epoch %d: logit scale %.4f", epoch, float(self.model.scale))


@register_trainer("DOT_MAP")
class DotMapTrainer(Trainer):
    def build_optimizer(self, model):
        decayed, kept = [], []
        for parameter in model.parameters():
            if parameter.requires_grad:
                (kept if parameter.ndim <= 1 else decayed).append(parameter)
        groups = [{"params": decayed, "weight_decay": self.cfg.MODEL.DOT_MAP.WEIGHT_DECAY, "lr_scale": 1.0},
                  {"params": kept, "weight_decay": 0.0, "lr_scale": 1.0}]
        return build_optimizer(self.cfg, model, self.recipe, groups)

    def build_hooks(self):
        hooks = super().build_hooks()
        hooks.insert(-1, LogitScaleLog(unwrap(self.model)))  # before the stop on a signal, which stays last
        return hooks
