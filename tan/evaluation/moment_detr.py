"""Moment-DETR's metrics as an evaluator (docs/metric.md §6: tan.evaluation.detr_metrics computes them),
and its submission file: what its evaluation server and ``standalone_eval`` read (§6.3). One JSON line per query: ``qid``, ``query``, ``vid``,
``pred_relevant_windows`` ([start, end, score] in seconds, best first, at most ten) and, for
datasets with saliency labels or without any labels, ``pred_saliency_scores`` (one score per
2-second clip). The
QVHighlights server takes ``hl_val_submission.jsonl`` and ``hl_test_submission.jsonl`` in one zip."""
import json
import os
import re

from ..config.evaluators import DETR_EVALUATOR, register_evaluator
from ..utils.io import atomic_write_text
from ..utils.logger import get_logger
from .detr_metrics import (CLIP_SECONDS, DETR_METRIC_NAMES, HIGHLIGHT_METRIC_NAMES, MAX_WINDOWS, buckets_with_queries,
                           clip_labels, detr_metrics, highlight_metrics)
from .evaluator import DatasetEvaluator

# a dataset named "qvhighlight..._{split}" gets the server's file name, hl_{split}_submission.jsonl
_QVHIGHLIGHTS = re.compile(r"qvhighlights?(_\w+)?_(?P<split>train|val|test)$")


def submission_name(dataset_name):
    """The submission file's name for ``dataset_name``: the server's for QVHighlights, else {name}_submission.jsonl."""
    found = _QVHIGHLIGHTS.fullmatch(dataset_name)
    return f"hl_{found['split']}_submission.jsonl" if found else f"{dataset_name}_submission.jsonl"


def submission_record(qid, query, vid, windows, saliency=None):
    """One line: ``windows`` [(start, end, score)] best first; ``saliency`` a score per clip, or None.
    The values are written unrounded: rounded scores of a barely trained model tie, and ties change
    the ranks that mAP and HIT@1 read, so the file scores as the evaluation that wrote it."""
    record = {"qid": qid, "query": query, "vid": vid,
              "pred_relevant_windows": [[float(s), float(e), float(p)] for s, e, p in windows]}
    if saliency is not None:
        record["pred_saliency_scores"] = [float(x) for x in saliency]
    return record


def write_submission(path, dataset, predictions):
    """The submission file of ``dataset``'s queries from inference's ``predictions``
    {index: tan.evaluation.Prediction}; qids as the annotation file wrote them."""
    lines = []
    for index in sorted(predictions):
        moments, filled, scores, saliency = predictions[index]
        windows = [(s, e, p) for (s, e), p in zip(moments[filled].tolist(), scores[filled].tolist())]
        record = submission_record(dataset.qids[index], dataset.sentences[index],
                                   dataset.videos[dataset.video_ids[index]], windows,
                                   None if saliency is None else saliency.tolist())
        lines.append(json.dumps(record))
    atomic_write_text(path, "".join(line + "\n" for line in lines))


_PARTIAL_SALIENCY_WARNED = set()  # dataset names warned of already: once per name and process


def query_gt_moments(dataset, indices):
    """Each query's own ground-truth windows [W_q, 2] (the dataset pads them to the most of any query)."""
    return [dataset.gt_moments[i, :dataset.moment_counts[i]] for i in indices]


@register_evaluator(DETR_EVALUATOR)
class MomentDetrEvaluator(DatasetEvaluator):
    """Moment retrieval as Moment-DETR's standalone_eval reports it, highlight detection where the
    dataset has saliency labels, and the submission file (a split without labels gets the file alone,
    with each clip's saliency: the server scores highlights too)."""

    METRIC_NAMES = DETR_METRIC_NAMES + HIGHLIGHT_METRIC_NAMES
    COMPARED = METRIC_NAMES

    @classmethod
    def table_groups(cls):
        return [("Moment-DETR", DETR_METRIC_NAMES), ("highlights", HIGHLIGHT_METRIC_NAMES)]

    def reset(self):
        super().reset()
        self.buckets = {}

    def predicted_per_query(self):
        return MAX_WINDOWS

    def wants_saliency(self):
        return self.dataset.saliency is not None or not self.dataset.labeled

    def reported(self):
        if not self.dataset.labeled:
            return []
        buckets = buckets_with_queries(query_gt_moments(self.dataset, range(len(self.dataset))))  # no empty bucket
        return ([n for n in DETR_METRIC_NAMES if n.split("-")[1] in buckets]
                + (list(HIGHLIGHT_METRIC_NAMES) if self.dataset.saliency is not None else []))

    def evaluate(self):
        dataset, order = self.dataset, range(len(self.dataset))
        listed = [tuple(t.double().numpy() for t in self.predictions[i].kept()) for i in order]
        results = detr_metrics(listed, query_gt_moments(dataset, order))
        self.buckets = results.pop("MR-buckets")
        if self.wants_saliency():
            scored = [i for i in order if dataset.saliency[i] is not None]
            if len(scored) < len(order) and dataset.name not in _PARTIAL_SALIENCY_WARNED:
                _PARTIAL_SALIENCY_WARNED.add(dataset.name)
                get_logger("inference").warning(
                    "%s: highlight detection is scored over the %d of %d queries that have saliency labels",
                    dataset.name, len(scored), len(order))
            labels = [clip_labels(dataset.durations[i], *dataset.saliency[i]) for i in scored]
            results.update(highlight_metrics([self.predictions[i].saliency.double().numpy() for i in scored], labels))
        return results

    def record(self):
        return {"MR-buckets": self.buckets} if self.buckets else {}

    def submission_name(self):
        return submission_name(self.dataset_name)

    def write(self, folder):
        write_submission(os.path.join(folder, self.submission_name()), self.dataset, self.predictions)


__all__ = ["CLIP_SECONDS", "MomentDetrEvaluator", "query_gt_moments", "submission_name", "submission_record",
           "write_submission"]
