"""The closed sets of values that some config keys accept.

They live with the config (which depends on nothing above ``tan.utils``) so
that validation and the code that acts on a value read one definition: the
evaluation reports exactly the metrics named here, and the precision code
accepts exactly these AMP modes.
"""

# SOLVER.AMP: float32, float16 autocast with a gradient scaler, bfloat16 autocast.
AMP_MODES = ("off", "fp16", "bf16")

# TEST.NMS_UNITS: what the NMS measures the IoU of two candidates on
# (docs/metric.md §2): float32 seconds as the reference computes them, or
# exact clip units. The first is the default.
NMS_UNITS = ("seconds", "clips")

# TEST.WINDOW.RELEVANCE: which windows of a long video a sentence is grounded in (tan.engine.relevance_stage).
RELEVANCE_CHOICES = ("auto", "learned", "pooled", "none")
# TEST.WINDOW.SCORE: how a kept moment's score and its window's relevance make its final score.
SCORE_CHOICES = ("product", "sum")

# The metric (docs/metric.md §3): R@k,IoU@m for these k and m, plus mIoU.
RECALL_AT = (1, 5)
IOU_THRESHOLDS = (0.1, 0.3, 0.5, 0.7)


# TEST.DETR_METRICS: Moment-DETR's metrics besides ours (docs/metric.md §6): "auto" on for datasets
# with JSON-lines annotations (the format of the DETR half of the field), "on" everywhere, "off" never.
DETR_METRICS = ("auto", "on", "off")
# Their names (tan.engine.window_metrics reports them); the HL ones only on datasets with saliency labels.
DETR_METRIC_NAMES = ("MR-full-R1@0.5", "MR-full-R1@0.7", "MR-full-mAP", "MR-full-mAP@0.5", "MR-full-mAP@0.75",
                     "MR-short-mAP", "MR-middle-mAP", "MR-long-mAP")
HIGHLIGHT_METRIC_NAMES = tuple(f"HL-min-{level}-{what}" for level in ("Fair", "Good", "VeryGood")
                               for what in ("mAP", "Hit1"))


# Ego4D NLQ's figures (tan/engine/long_video_metrics.py), reported on datasets of its format.
NLQ_METRIC_NAMES = ("NLQ-R@1,IoU@0.3", "NLQ-R@1,IoU@0.5", "NLQ-R@5,IoU@0.3", "NLQ-R@5,IoU@0.5", "NLQ-mIoU")
# MAD's (tan/engine/long_video_metrics.py), reported on datasets of its format, from each query's top
# MAD_PREDICTED moments.
MAD_RECALL_AT = (1, 5, 10, 50, 100)
MAD_IOU_THRESHOLDS = (0.1, 0.3, 0.5, 0.7)
MAD_METRIC_NAMES = tuple(f"MAD-R@{k},IoU@{t}" for k in MAD_RECALL_AT for t in MAD_IOU_THRESHOLDS)
MAD_PREDICTED = MAD_RECALL_AT[-1]


def metric_names():
    """Every metric the evaluation always reports, in report order."""
    return [f"R@{k},IoU@{m}" for k in RECALL_AT for m in IOU_THRESHOLDS] + ["mIoU"]


def best_metric_names():
    """The metrics TEST.BEST_METRIC may name: ours, Moment-DETR's where TEST.DETR_METRICS reports them,
    and the long-video benchmarks' on their datasets."""
    return (metric_names() + list(DETR_METRIC_NAMES) + list(HIGHLIGHT_METRIC_NAMES) + list(NLQ_METRIC_NAMES)
            + list(MAD_METRIC_NAMES))
