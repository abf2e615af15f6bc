"""Evaluation: a model's kept moments -> the figures of each test dataset and the files they go to.

Each evaluator is a class registered by name (tan.config.evaluators) and lives here with what it
measures: the recall every labeled dataset reports (recall), Moment-DETR's metrics and submission
file (moment_detr, with its arithmetic in detr_metrics), Ego4D NLQ's (ego4d_nlq) and MAD's (mad),
with their evaluators' arithmetic in long_video_metrics. A format names its datasets' evaluators and
a plug-in registers its own (docs/metric.md §7). Besides: selection (candidates -> kept moments by
greedy NMS, and each clip's saliency), predictions (predictions.jsonl), comparison (several
checkpoints' figures as one table).

This package is a built-in plug-in (tan.config.plugins): importing it registers the built-in
evaluators, one module each.
"""
import importlib
import pkgutil

from .evaluator import DatasetEvaluator, Prediction, build_evaluators, evaluator_names_for, register_evaluator
from .recall import IOU_THRESHOLDS, RECALL_AT, evaluate_moments, format_table, metric_names
from .selection import clip_saliency, top_candidates, top_moments

__all__ = ["DatasetEvaluator", "Prediction", "build_evaluators", "evaluator_names_for", "register_evaluator",
           "evaluate_moments", "format_table", "metric_names", "IOU_THRESHOLDS", "RECALL_AT", "clip_saliency",
           "top_candidates", "top_moments"]

# Every module of this package, so that an evaluator's module registers it and adding one touches
# only its own module.
for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
del _module
