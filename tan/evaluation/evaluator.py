"""What an evaluator is, and which ones a test dataset gets (docs/metric.md §7).

An evaluator turns a model's kept moments on one test dataset into figures, and may write a file of
its own (a benchmark's submission file). The inference loop (tan.engine.inference) runs the same
calls for every dataset and names no format: it resets each evaluator, hands it the predictions
(:meth:`DatasetEvaluator.process`, on rank 0, every rank's gathered), asks for the figures
(:meth:`DatasetEvaluator.evaluate`) and has it write its files (:meth:`DatasetEvaluator.write`).

Which evaluators a dataset gets: the recall (R@k,IoU@m and mIoU, tan.evaluation.recall) on every
labeled dataset, then those its annotation format declares (``register_format(..., evaluators=...)``),
then those of TEST.EVALUATORS; TEST.DETR_METRICS turns Moment-DETR's on or off for every dataset.
"""
from typing import NamedTuple, Optional

import torch

from ..config.checks import register_config_check
from ..config.choices import DETR_METRICS
from ..config.evaluators import (DETR_EVALUATOR, EVALUATORS, best_metric_names, evaluator_names, evaluator_of,
                                 register_evaluator)
from ..config.models import need
from ..data.formats import format_evaluators
from ..errors import TanError

__all__ = ["DatasetEvaluator", "Prediction", "build_evaluators", "register_evaluator"]

RECALL_EVALUATOR = "recall"


class Prediction(NamedTuple):
    """One query's kept moments, best first: ``moments`` [k, 2] seconds, ``filled`` [k] bool (which
    slots hold a moment: a video may have fewer candidates than k), ``scores`` [k], and ``saliency``
    [clips] (each 2-second clip's score) where an evaluator asked for it, else None. On the CPU."""
    moments: torch.Tensor
    filled: torch.Tensor
    scores: torch.Tensor
    saliency: Optional[torch.Tensor] = None

    def kept(self):
        """(moments [n, 2], scores [n]) of the filled slots, best first."""
        return self.moments[self.filled], self.scores[self.filled]


class DatasetEvaluator:
    """One set of figures over a test dataset. A subclass is registered with
    ``@register_evaluator(name)`` and declares what it reports:

    * ``METRIC_NAMES``: every figure it may report, in report order (TEST.BEST_METRIC may name one);
    * ``TITLE``: the label of its line under the log's table of results;
    * ``COMPARED``: the figures a comparison of checkpoints (tan-test over several) shows as columns.

    It is built per dataset (``dataset``: a tan.data.MomentDataset; ``dataset_name``: its catalog
    name, which file names may carry) on every process, where what it declares is asked
    (:meth:`predicted_per_query`, :meth:`wants_saliency`, :meth:`reported`); then, on rank 0 alone,
    with every process's predictions gathered: :meth:`reset`, :meth:`process` (any number of
    times), on a labeled dataset :meth:`evaluate` and :meth:`record`, and :meth:`write` for every
    folder the evaluation's files go to."""

    NAME = ""  # set by register_evaluator
    METRIC_NAMES = ()
    TITLE = ""
    COMPARED = ()

    @classmethod
    def table_groups(cls):
        """[(label, figure names)]: the lines of the log's table its figures make."""
        return [(cls.TITLE, cls.METRIC_NAMES)] if cls.TITLE else []

    def __init__(self, dataset, dataset_name):
        self.dataset, self.dataset_name = dataset, dataset_name
        self.predictions = {}

    def predicted_per_query(self):
        """How many moments of each query its figures read (inference keeps the most any evaluator asks)."""
        return 1

    def wants_saliency(self):
        """Whether it reads each clip's saliency (Prediction.saliency)."""
        return False

    def reported(self):
        """The figures it reports on this dataset (for TEST.BEST_METRIC, before any is computed)."""
        return list(self.METRIC_NAMES) if self.dataset.labeled else []

    def reset(self):
        self.predictions = {}

    def process(self, predictions):
        """Take ``predictions`` {query index: :class:`Prediction`}; a later one of a query replaces an
        earlier one (a query grounded by windows after the whole-video pass)."""
        self.predictions.update(predictions)

    def ordered(self):
        """The predictions by query index, every query of the dataset once."""
        return [self.predictions[i] for i in range(len(self.dataset))]

    def evaluate(self):
        """{figure name: value} over the dataset (labeled datasets only)."""
        return {}

    def record(self):
        """What metrics.json holds of this evaluation besides the figures (after :meth:`evaluate`): {key: value}."""
        return {}

    def submission_name(self):
        """The name of the file :meth:`write` writes (a submission file), or None."""
        return None

    def write(self, folder):
        """Write its own files into ``folder`` (atomically: each whole, or as it was)."""


def evaluator_names_for(dataset, detr_mode="auto", extra=()):
    """The names of the evaluators of ``dataset`` (see the module's docstring), in report order."""
    if detr_mode not in DETR_METRICS:
        raise ValueError(f"TEST.DETR_METRICS must be one of {DETR_METRICS}, got {detr_mode!r}")
    declared = list(format_evaluators(dataset.annotation_format))
    detr = DETR_EVALUATOR in declared if detr_mode == "auto" else detr_mode == "on"
    names = [RECALL_EVALUATOR] + [n for n in declared if n != DETR_EVALUATOR] + ([DETR_EVALUATOR] if detr else [])
    return list(dict.fromkeys(names + list(extra)))  # each once


def build_evaluators(dataset, dataset_name, detr_mode="auto", extra=()):
    """The evaluators of ``dataset`` (:func:`evaluator_names_for`), built."""
    names = evaluator_names_for(dataset, detr_mode, extra)
    unknown = [n for n in names if n not in EVALUATORS]
    if unknown:
        source = ("TEST.EVALUATORS" if unknown[0] in extra else
                  f"annotation format {dataset.annotation_format!r} (the evaluators it declares)")
        raise TanError(f"{dataset_name}: {source} names evaluator {unknown[0]!r}, which is not registered; "
                       f"registered: {', '.join(EVALUATORS.names())} (a plug-in's evaluators need its module "
                       f"in PLUGINS)")
    return [EVALUATORS.get(name)(dataset, dataset_name) for name in names]


@register_config_check("TEST evaluators")
def check_evaluation_settings(cfg):
    """TEST.BEST_METRIC (a figure some registered evaluator reports; whether the first validation
    dataset reports it is checked when training starts), TEST.DETR_METRICS and TEST.EVALUATORS."""
    need(cfg.TEST.BEST_METRIC in best_metric_names(), "TEST.BEST_METRIC",
         f"expected one of {', '.join(best_metric_names())}; got {cfg.TEST.BEST_METRIC!r}")
    need(cfg.TEST.DETR_METRICS in DETR_METRICS, "TEST.DETR_METRICS",
         f"expected {', '.join(repr(m) for m in DETR_METRICS[:-1])} or {DETR_METRICS[-1]!r}, got {cfg.TEST.DETR_METRICS!r}")
    need(evaluator_of(cfg.TEST.BEST_METRIC) != DETR_EVALUATOR or cfg.TEST.DETR_METRICS != "off", "TEST.BEST_METRIC",
         f"{cfg.TEST.BEST_METRIC!r} is one of Moment-DETR's metrics, which TEST.DETR_METRICS 'off' turns off")
    extra = cfg.TEST.EVALUATORS
    need(isinstance(extra, (list, tuple)) and all(isinstance(n, str) for n in extra), "TEST.EVALUATORS",
         f"expected a list of evaluator names, got {extra!r}")
    need(DETR_EVALUATOR not in extra, "TEST.EVALUATORS",
         f"{DETR_EVALUATOR!r} is turned on for every dataset by TEST.DETR_METRICS 'on' (and off by 'off'); leave it "
         f"out of TEST.EVALUATORS")
    unknown = [n for n in extra if n not in evaluator_names()]
    need(not unknown, "TEST.EVALUATORS",
         f"unknown evaluator {', '.join(map(repr, unknown))}; registered: {', '.join(evaluator_names())} (a plug-in's "
         f"evaluators need its module in PLUGINS)")


def check_evaluators_registered(entries):
    """Refuse, before any work, a test or validation dataset (catalog ``entries``, each with its
    "name" and "format") whose format, or TEST.EVALUATORS, names an evaluator no imported module
    registers: it would otherwise fail at its first evaluation, perhaps after training."""
    for entry in entries:
        declared = format_evaluators(entry.get("format", "seconds"))
        unknown = [n for n in declared if n not in EVALUATORS]
        if unknown:
            raise TanError(f"dataset {entry['name']!r}: its annotation format {entry.get('format')!r} is tested with "
                           f"evaluator {unknown[0]!r}, which is not registered; registered: "
                           f"{', '.join(EVALUATORS.names())} (the format's plug-in must register its evaluators, or "
                           f"name a module of PLUGINS that does)")
