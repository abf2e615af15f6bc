"""The registry of evaluators: what a test reports on a dataset besides R@k,IoU@m and mIoU.

An evaluator is a class (tan.evaluation.DatasetEvaluator) registered here under a name. An
annotation format names the evaluators its datasets get (``register_format(..., evaluators=...)``)
and TEST.EVALUATORS adds more to every test dataset. The registry sits below the evaluators, as
the models' does, so that a config's TEST.BEST_METRIC and TEST.EVALUATORS are checked with the rest
of it; the built-in evaluators are the plug-in ``tan.evaluation``, loaded with the built-in models.
"""
from ..errors import TanError
from ..utils.registry import Registry
from .choices import metric_names

EVALUATORS = Registry("evaluator (TEST.EVALUATORS)")
# The evaluator that TEST.DETR_METRICS turns on for every dataset ("on") or off ("off"); "auto" leaves
# it to the formats that name it (JSON lines).
DETR_EVALUATOR = "moment_detr"


def register_evaluator(name):
    """Class decorator: register an evaluator under ``name`` (what formats and TEST.EVALUATORS call it)."""
    if not isinstance(name, str) or not name.replace("_", "").isalnum() or name != name.lower():
        raise ValueError(f"evaluator name {name!r}: expected lower-case letters, digits and '_'")

    def deco(cls):
        names = getattr(cls, "METRIC_NAMES", None)
        if not isinstance(names, tuple) or not all(isinstance(n, str) and n for n in names):
            raise TanError(f"evaluator {name!r} ({cls.__module__}.{cls.__qualname__}): METRIC_NAMES must be a "
                           f"tuple of the names of the figures it reports, got {names!r}")
        taken = {n: other for other in EVALUATORS.names() for n in EVALUATORS.get(other).METRIC_NAMES}
        taken.update({n: "the recall every test reports" for n in metric_names()})
        clash = [f"{n!r} ({taken[n]})" for n in names if n in taken]
        if clash:
            raise TanError(f"evaluator {name!r} ({cls.__module__}.{cls.__qualname__}) reports figures that "
                           f"another already names: {', '.join(clash)}; give its figures a prefix of its own")
        cls.NAME = name
        return EVALUATORS.register(name)(cls)

    return deco


def evaluator_names():
    """The evaluators registered now (the built-in ones and those of imported plug-ins)."""
    return EVALUATORS.names()


def best_metric_names():
    """The metrics TEST.BEST_METRIC may name: R@k,IoU@m and mIoU, and every figure of a registered
    evaluator (whether the first validation dataset reports it is checked when training starts)."""
    return metric_names() + [n for name in EVALUATORS.names() for n in EVALUATORS.get(name).METRIC_NAMES]


def evaluator_of(metric):
    """The name of the registered evaluator that reports ``metric``, or None (the recall, or unknown)."""
    return next((name for name in EVALUATORS.names() if metric in EVALUATORS.get(name).METRIC_NAMES), None)
