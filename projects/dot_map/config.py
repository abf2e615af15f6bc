"""DOT_MAP's settings: everything under MODEL.DOT_MAP, each key documented."""
from yacs.config import CfgNode as CN

from tan.modeling import need


def add_dot_map_config(cfg):
    node = cfg.MODEL.DOT_MAP = CN()
    # N: clips of the 2D map (the map is N x N).
    node.NUM_CLIPS = 16
    # D_in: width of the clip features.
    node.INPUT_SIZE = 128
    # H: channels of the pooled clips, of the map's cells and of the sentence vector.
    node.HIDDEN_SIZE = 64
    # Kernel of the average pooling from INPUT.NUM_PRE_CLIPS rows to NUM_CLIPS rows.
    node.KERNEL_SIZE = 4
    # Sparse sampling of the map (docs/model.md §3.1).
    node.POOLING_COUNTS = [7, 4]
    # A cell's training target is its IoU with the moment rescaled to [0, 1]: IoU at or below MIN_IOU gives 0,
    node.MIN_IOU = 0.5
    # ... and IoU at or above MAX_IOU gives 1.
    node.MAX_IOU = 1.0
    # The logits are divided by a temperature that falls linearly from this value to 1
    # over the first WARMUP_EPOCHS epochs (a hook of the training loop sets it).
    node.TEMPERATURE = 2.0
    # Epochs of that warm-up (0: temperature 1 throughout).
    node.WARMUP_EPOCHS = 2
    # Gradient norm clipped at this value (0: no clipping).
    node.CLIP_GRAD_NORM = 1.0
    # AdamW's weight decay.
    node.WEIGHT_DECAY = 0.0001


def validate_dot_map_config(cfg):
    node = cfg.MODEL.DOT_MAP
    for key in ("NUM_CLIPS", "INPUT_SIZE", "HIDDEN_SIZE", "KERNEL_SIZE"):
        need(isinstance(node[key], int) and node[key] > 0, f"MODEL.DOT_MAP.{key}",
             f"expected a positive integer, got {node[key]!r}")
    need(cfg.INPUT.NUM_PRE_CLIPS % node.NUM_CLIPS == 0, "INPUT.NUM_PRE_CLIPS",
         f"must be a multiple of MODEL.DOT_MAP.NUM_CLIPS ({node.NUM_CLIPS}); got {cfg.INPUT.NUM_PRE_CLIPS}")
    counts = list(node.POOLING_COUNTS)
    largest = counts[0] + sum(c * 2 ** (g + 1) for g, c in enumerate(counts[1:])) if counts else 0
    need(counts and all(isinstance(c, int) and c > 0 for c in counts) and largest < node.NUM_CLIPS,
         "MODEL.DOT_MAP.POOLING_COUNTS", f"expected positive counts whose offsets stay below NUM_CLIPS "
         f"({node.NUM_CLIPS}); got {counts}")
    need(0.0 <= node.MIN_IOU < node.MAX_IOU <= 1.0, "MODEL.DOT_MAP.MIN_IOU",
         f"need 0 <= MIN_IOU < MAX_IOU <= 1; got {node.MIN_IOU}, {node.MAX_IOU}")
    need(node.TEMPERATURE >= 1.0, "MODEL.DOT_MAP.TEMPERATURE", f"expected a value >= 1, got {node.TEMPERATURE}")
    need(node.WARMUP_EPOCHS >= 0, "MODEL.DOT_MAP.WARMUP_EPOCHS", f"expected an integer >= 0, got {node.WARMUP_EPOCHS}")
    need(node.CLIP_GRAD_NORM >= 0, "MODEL.DOT_MAP.CLIP_GRAD_NORM", f"expected a value >= 0, got {node.CLIP_GRAD_NORM}")
