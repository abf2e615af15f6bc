"""The optimizers SOLVER.OPTIMIZER names.

Each builder takes the config, the model's parameter groups (each with its
``lr``), the model's recipe and the options that choose torch's kernels, and
returns a torch optimizer. Adam's and AdamW's betas and every optimizer's
weight decay come from the model's recipe (``recipe(cfg)``; None: torch's
defaults), so a model's reference settings hold whichever optimizer is named.
torch is imported by the builders, so that checking a config does not load it.
"""
from ..utils.registry import Registry

OPTIMIZERS = Registry("optimizer (SOLVER.OPTIMIZER)")


def register_optimizer(name):
    """Decorator: ``builder(cfg, groups, recipe, kernels) -> torch.optim.Optimizer`` under ``name``."""
    return OPTIMIZERS.register(name)


def _options(recipe, *names):
    return {name: getattr(recipe, name) for name in names if getattr(recipe, name) is not None}


@register_optimizer("adam")
def adam(cfg, groups, recipe, kernels):
    from torch.optim import Adam
    return Adam(groups, lr=cfg.SOLVER.LR, **_options(recipe, "betas", "weight_decay"), **kernels)


@register_optimizer("adamw")
def adamw(cfg, groups, recipe, kernels):
    from torch.optim import AdamW
    return AdamW(groups, lr=cfg.SOLVER.LR, **_options(recipe, "betas", "weight_decay"), **kernels)


@register_optimizer("sgd")
def sgd(cfg, groups, recipe, kernels):
    from torch.optim import SGD
    return SGD(groups, lr=cfg.SOLVER.LR, momentum=cfg.SOLVER.MOMENTUM, **_options(recipe, "weight_decay"), **kernels)


def optimizer_name(cfg, recipe):
    """SOLVER.OPTIMIZER, or the recipe's optimizer when it is ""."""
    return cfg.SOLVER.OPTIMIZER or recipe.optimizer


def with_relevance(model, groups):
    """``groups`` and, when the model has a window relevance head (MODEL.RELEVANCE) that its own groups
    leave out (a model that lists its parameters by name), a group of the head's parameters."""
    head = model.relevance
    listed = {id(p) for group in groups for p in group["params"]}
    missing = [p for p in (head.parameters() if head is not None else ()) if id(p) not in listed]
    return groups + ([{"params": missing, "lr_scale": 1.0, "name": "window relevance"}] if missing else [])


def build_optimizer(cfg, model, recipe, groups=None):
    """The optimizer SOLVER.OPTIMIZER names (or the model's ``recipe``'s) over ``groups`` (default:
    the model's ``parameter_groups()``; each a dict with ``params`` and ``lr_scale``, and any
    setting of its own such as ``weight_decay``); each group's rate is SOLVER.LR times its ``lr_scale``."""
    build = OPTIMIZERS.get(optimizer_name(cfg, recipe))
    groups = with_relevance(model, model.parameter_groups()) if groups is None else groups
    for group in groups:
        group["lr"] = cfg.SOLVER.LR * group["lr_scale"]
    params = [p for g in groups for p in g["params"]]
    # One fused kernel for all parameters on CUDA (it also lets an fp16 gradient
    # scaler skip its per-step host sync); the multi-tensor path elsewhere.
    # Both compute the update exactly as the plain loop does, up to rounding.
    on_cuda = bool(params) and all(p.is_cuda for p in params)
    kernels = dict(fused=on_cuda or None, foreach=None if on_cuda else True)
    return build(cfg, groups, recipe, kernels)
