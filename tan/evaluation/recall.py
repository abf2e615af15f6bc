"""R@k,IoU@m and mIoU (docs/metric.md §2, §3): the figures every labeled test dataset reports, and
the log's table of a test's results."""
import torch

from ..config.choices import IOU_THRESHOLDS, RECALL_AT, metric_names
from ..config.evaluators import EVALUATORS, register_evaluator
from ..structures.moments import best_moment_iou
from .evaluator import RECALL_EVALUATOR, DatasetEvaluator

__all__ = ["RecallEvaluator", "evaluate_moments", "format_table", "metric_names", "RECALL_AT", "IOU_THRESHOLDS"]


def evaluate_moments(kept_moments, filled, gt_moments):
    """Metrics (percent) from top moments [Q, k, 2], filled [Q, k], ground truth [Q, 2], or
    [Q, W, 2] for queries with several ground-truth moments: a moment's IoU is then its best one's
    (docs/metric.md §2, as Moment-DETR's R1)."""
    every = gt_moments[:, None, :] if gt_moments.dim() == 2 else gt_moments
    ious = best_moment_iou(kept_moments, every[:, None, :, :]) * filled  # [Q, k]
    results = {}
    for k in RECALL_AT:
        best = ious[:, :k].max(dim=1).values
        for m in IOU_THRESHOLDS:
            results[f"R@{k},IoU@{m}"] = 100.0 * (best > m).double().mean().item()
    results["mIoU"] = 100.0 * ious[:, 0].double().mean().item()
    return results


def format_table(results, title=""):
    """A small text table: rows R@1 / R@5, columns IoU thresholds, and mIoU; then a line for each
    evaluator's figures that ``results`` holds (its TITLE), in the order ``results`` holds them."""
    head = "       " + "".join(f"IoU@{m:<6}" for m in IOU_THRESHOLDS)
    lines = [title] if title else []
    lines.append(head)
    for k in RECALL_AT:
        lines.append(f"R@{k:<5}" + "".join(f"{results[f'R@{k},IoU@{m}']:<10.2f}" for m in IOU_THRESHOLDS))
    lines.append(f"mIoU   {results['mIoU']:.2f}")
    order = {name: place for place, name in enumerate(results)}
    groups = []
    for name in EVALUATORS.names():
        for label, names in EVALUATORS.get(name).table_groups():
            present = [n for n in names if n in results]
            if present:
                groups.append((min(order[n] for n in present), label, present))
    for _, label, present in sorted(groups):
        lines.append(f"{label}: " + "  ".join(f"{n} {results[n]:.2f}" for n in present))
    return "\n".join(lines)


@register_evaluator(RECALL_EVALUATOR)
class RecallEvaluator(DatasetEvaluator):
    """R@k,IoU@m for k in RECALL_AT and m in IOU_THRESHOLDS, and mIoU, over each query's ground-truth
    windows (a moment's IoU is its best window's)."""

    METRIC_NAMES = ()  # the recall's names are tan.config.choices.metric_names(): every run has them
    TITLE = ""

    def predicted_per_query(self):
        return max(RECALL_AT)

    def reported(self):
        return metric_names() if self.dataset.labeled else []

    def evaluate(self):
        ordered = self.ordered()
        return evaluate_moments(torch.stack([p.moments for p in ordered]), torch.stack([p.filled for p in ordered]),
                                torch.from_numpy(self.dataset.gt_moments))
