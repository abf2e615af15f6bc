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

# The metric (docs/metric.md §3): R@k,IoU@m for these k and m, plus mIoU.
RECALL_AT = (1, 5)
IOU_THRESHOLDS = (0.1, 0.3, 0.5, 0.7)


def metric_names():
    """Every metric the evaluation reports, in report order (TEST.BEST_METRIC picks one)."""
    return [f"R@{k},IoU@{m}" for k in RECALL_AT for m in IOU_THRESHOLDS] + ["mIoU"]
