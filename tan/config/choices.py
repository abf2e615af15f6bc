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

# TEST.WINDOW.RELEVANCE: which windows of a long video a sentence is grounded in (tan.engine.long_videos.relevance_stage).
RELEVANCE_CHOICES = ("auto", "learned", "pooled", "none")
# TEST.WINDOW.SCORE: how a kept moment's score and its window's relevance make its final score.
SCORE_CHOICES = ("product", "sum")

# The metric (docs/metric.md §3): R@k,IoU@m for these k and m, plus mIoU.
RECALL_AT = (1, 5)
IOU_THRESHOLDS = (0.1, 0.3, 0.5, 0.7)


# TEST.DETR_METRICS: Moment-DETR's metrics besides ours (docs/metric.md §6): "auto" on for datasets
# with JSON-lines annotations (the format of the DETR half of the field), "on" everywhere, "off" never.
DETR_METRICS = ("auto", "on", "off")


def metric_names():
    """Every metric the evaluation always reports, in report order."""
    return [f"R@{k},IoU@{m}" for k in RECALL_AT for m in IOU_THRESHOLDS] + ["mIoU"]
