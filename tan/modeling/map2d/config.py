"""The settings that every model of the 2D-map family shares, and their checks.

A model of the family keeps them in its own subtree, MODEL.{NAME} (so that
each model's files read as the reference code's): the map's size, the feature
pooling, the map itself and the stacked 2D convolutions over it.
"""
from yacs.config import CfgNode as CN

from ...config.architecture import model_key
from ...config.models import need
from ...config.setup import is_int, value_at

# FEAT2D.NAME: the max-pooled map or the learned convolutional map.
FEAT2D_NAMES = ("pool", "conv")


def add_map_config(node, input_size=4096):
    """Add the shared keys to ``node`` (a model's MODEL.{NAME})."""
    # N: number of clips of the 2D temporal map (the map is N x N).
    node.NUM_CLIPS = 128

    node.FEATPOOL = CN()
    # D_in: dimension of the pre-extracted clip features.
    node.FEATPOOL.INPUT_SIZE = input_size
    # H: channels of the pooled clip features and of the 2D map.
    node.FEATPOOL.HIDDEN_SIZE = 512
    # Kernel of the average pooling from NUM_PRE_CLIPS rows to NUM_CLIPS rows; its
    # stride is NUM_PRE_CLIPS // NUM_CLIPS.
    node.FEATPOOL.KERNEL_SIZE = 2

    node.FEAT2D = CN()
    # How a cell (i, j) summarises clips i..j (docs/model.md §3): "pool", the
    # element-wise max; "conv", a learned chain of 1D convolutions, as MMN builds
    # it (weights feat2d.convs.*; docs/model.md §3.2).
    node.FEAT2D.NAME = "pool"
    # Sparse sampling of the 2D map: the first count uses stride 1, each later
    # count doubles the stride (see docs/model.md §3.1). Sum of strided offsets
    # must stay below NUM_CLIPS.
    node.FEAT2D.POOLING_COUNTS = [15, 8, 8, 8]

    node.PREDICTOR = CN()
    # Hp: channels of the stacked 2D convolutions.
    node.PREDICTOR.HIDDEN_SIZE = 512
    # K: kernel size of each 2D convolution.
    node.PREDICTOR.KERNEL_SIZE = 5
    # S: number of stacked 2D convolutions.
    node.PREDICTOR.NUM_STACK_LAYERS = 8
    # (tan) Compute each conv only over row strips of this many rows that cover
    # the cells the valid outputs depend on (about half the dense work; with
    # batch norm, in training, the cells whose window is not all zeros:
    # docs/mmn.md §2.1); 0 runs the dense convs of the reference. Same results
    # up to float rounding.
    node.PREDICTOR.STRIP_ROWS = 16
    # With strips, in training: drop the layers' stored activations after the
    # forward and recompute them in the backward (activation checkpointing).
    # Same gradients, exactly; less memory, one more forward of the stack.
    node.PREDICTOR.RECOMPUTE = False

    node.LOSS = CN()
    # Temporal IoU mapped to target 0 (and below).
    node.LOSS.MIN_IOU = 0.3
    # Temporal IoU mapped to target 1 (and above).
    node.LOSS.MAX_IOU = 0.7
    return node


# The shared keys that may change between the runs of a folder (the same convolutions, computed where needed).
MAP_RUNTIME_KEYS = ("PREDICTOR.STRIP_ROWS", "PREDICTOR.RECOMPUTE")


def valid_cells(n, pooling_counts):
    """The number of candidate moments of the N x N map (docs/model.md §3.1): the diagonal,
    then each offset's starts at the stride of its group."""
    cells, stride, offset = n, 1, 0
    for count in pooling_counts:
        for _ in range(count):
            offset += stride
            cells += len(range(0, n - offset, stride))
        stride *= 2
    return cells


def check_counts(cfg, keys):
    """Each of ``keys`` (relative to the model's subtree) a positive integer."""
    settings = cfg.MODEL[cfg.MODEL.ARCHITECTURE]
    for key in keys:
        value = value_at(settings, key)
        need(is_int(value) and value > 0, model_key(cfg, key), f"expected a positive integer, got {value!r}")


def check_map_counts(cfg):
    """The shared sizes: positive integers (STRIP_ROWS: >= 0, 0 meaning dense)."""
    check_counts(cfg, ("NUM_CLIPS", "FEATPOOL.INPUT_SIZE", "FEATPOOL.HIDDEN_SIZE", "FEATPOOL.KERNEL_SIZE",
                       "PREDICTOR.HIDDEN_SIZE", "PREDICTOR.KERNEL_SIZE", "PREDICTOR.NUM_STACK_LAYERS"))
    strip_rows = cfg.MODEL[cfg.MODEL.ARCHITECTURE].PREDICTOR.STRIP_ROWS
    need(is_int(strip_rows) and strip_rows >= 0, model_key(cfg, "PREDICTOR.STRIP_ROWS"),
         f"expected an integer >= 0, got {strip_rows!r}")
    recompute = cfg.MODEL[cfg.MODEL.ARCHITECTURE].PREDICTOR.RECOMPUTE
    need(not recompute or strip_rows > 0, model_key(cfg, "PREDICTOR.RECOMPUTE"),
         f"recomputes the bands of the strips, so it needs {model_key(cfg, 'PREDICTOR.STRIP_ROWS')} > 0 (got 0)")


def validate_map(cfg):
    """Pooling, the 2D map and the conv stack must fit together (docs/model.md §2, §3, §5);
    the sizes are checked already (:func:`check_map_counts`)."""
    arch, key = cfg.MODEL[cfg.MODEL.ARCHITECTURE], (lambda k: model_key(cfg, k))
    n, p = arch.NUM_CLIPS, cfg.INPUT.NUM_PRE_CLIPS
    need(is_int(p) and p > 0, "INPUT.NUM_PRE_CLIPS", f"expected a positive integer, got {p!r}")
    need(p % n == 0, "INPUT.NUM_PRE_CLIPS", f"must be a multiple of {key('NUM_CLIPS')} ({n}); got {p}")
    stride, kernel = p // n, arch.FEATPOOL.KERNEL_SIZE
    need((p - kernel) // stride + 1 == n, key("FEATPOOL.KERNEL_SIZE"),
         f"pooling {p} rows with kernel {kernel} and stride {stride} gives {(p - kernel) // stride + 1} clips, "
         f"not {key('NUM_CLIPS')} = {n}; use a kernel between {stride} and {2 * stride - 1}")
    counts = list(arch.FEAT2D.POOLING_COUNTS)
    need(len(counts) > 0 and all(is_int(c) and c > 0 for c in counts), key("FEAT2D.POOLING_COUNTS"),
         f"expected a non-empty list of positive integers, got {counts}")
    largest = counts[0] + sum(c * 2 ** (g + 1) for g, c in enumerate(counts[1:]))
    need(largest < n, key("FEAT2D.POOLING_COUNTS"),
         f"{counts} reaches offset {largest}, which must stay below {key('NUM_CLIPS')} = {n}")
    need(arch.FEAT2D.NAME in FEAT2D_NAMES, key("FEAT2D.NAME"),
         f"expected {' or '.join(repr(x) for x in FEAT2D_NAMES)}, got {arch.FEAT2D.NAME!r}")
    need((arch.PREDICTOR.KERNEL_SIZE - 1) * arch.PREDICTOR.NUM_STACK_LAYERS % 2 == 0,
         key("PREDICTOR.KERNEL_SIZE"),
         "(KERNEL_SIZE - 1) * NUM_STACK_LAYERS must be even so that the map returns to N x N")
    loss = arch.LOSS
    need(0.0 <= loss.MIN_IOU < loss.MAX_IOU <= 1.0, key("LOSS.MIN_IOU"),
         f"need 0 <= MIN_IOU < MAX_IOU <= 1; got MIN_IOU {loss.MIN_IOU}, MAX_IOU {loss.MAX_IOU}")


def check_even_when_bidirectional(cfg, lstm, size_key, size):
    """A bidirectional LSTM splits ``size`` (key ``size_key``) between its two directions."""
    if lstm.BIDIRECTIONAL:
        need(size % 2 == 0, model_key(cfg, size_key),
             "must be even when the LSTM is bidirectional (it is split between the two directions)")
