"""TAN_MSRA's settings, MODEL.TAN_MSRA (docs/tan_msra.md §2).

The subtrees are named after the modules of microsoft/2D-TAN's experiment
files (FRAME_MODULE, PROP_MODULE, FUSION_MODULE, MAP_MODULE, LOSS), so that a
converted file (tan-convert-config) reads like the one it came from. The
channel counts that its files repeat in several modules (the frame module's
HIDDEN_SIZE, the proposal module's, the fusion's, the map module's INPUT_SIZE)
are one key here, FRAME_MODULE.HIDDEN_SIZE; the conversion checks that they
agree. Defaults are its TACoS pool experiment.
"""
from yacs.config import CfgNode as CN

from ...config.models import need
from ...config.setup import is_int
from ..map2d.config import check_counts

# PROP_MODULE.NAME: its max-pooled and its convolutional maps.
PROP_NAMES = ("SparsePropMaxPool", "SparsePropConv")
# TOKENS: how a sentence becomes words.
TOKEN_RULES = ("whitespace", "tan")


def add_tan_msra_config(cfg):
    node = cfg.MODEL.TAN_MSRA = CN()
    # N: clips of the 2D map (the map is N x N); the reference's
    # DATASET.NUM_SAMPLE_CLIPS // DATASET.TARGET_STRIDE.
    node.NUM_CLIPS = 128
    # L2-normalise each feature row before the rows are averaged into INPUT.NUM_PRE_CLIPS
    # clips (the reference's DATASET.NORMALIZE).
    node.NORMALIZE = True
    # How sentences are split into words: "whitespace", the reference's (lower-cased,
    # split at white space, so that "pan." is one word, which GloVe does not know; for
    # the charades_txt format a final "." is dropped first, as its reader does; no
    # sentence is dropped for unknown words, they are zero vectors); "tan", tan's
    # tokeniser (docs/data.md §4).
    node.TOKENS = "whitespace"
    add_module_config(node)
    node.LOSS = CN()
    # Temporal IoU mapped to target 0 (and below).
    node.LOSS.MIN_IOU = 0.3
    # Temporal IoU mapped to target 1 (and above).
    node.LOSS.MAX_IOU = 0.7
    # Added to every positive target (which is first scaled by 1 - BIAS), then clamped to 1.
    node.LOSS.BIAS = 0.0
    # Gradient norm clipped at this value before each step (the reference clips at 10; 0: no clipping).
    node.CLIP_GRAD_NORM = 10.0
    # Adam's weight decay (the reference's TRAIN.WEIGHT_DECAY).
    node.WEIGHT_DECAY = 0.0


def add_module_config(node):
    """The settings of its four modules, one subtree each."""
    node.FRAME_MODULE = CN()
    # D_in: width of the clip features (the reference's FRAME_MODULE INPUT_SIZE).
    node.FRAME_MODULE.INPUT_SIZE = 4096
    # H: channels of the pooled clips, of the 2D map and of the fused map.
    node.FRAME_MODULE.HIDDEN_SIZE = 512
    # Kernel of the average pooling of the INPUT.NUM_PRE_CLIPS clips.
    node.FRAME_MODULE.KERNEL_SIZE = 2
    # Stride of that pooling; (NUM_PRE_CLIPS - KERNEL_SIZE) // STRIDE + 1 must be NUM_CLIPS.
    node.FRAME_MODULE.STRIDE = 2

    node.PROP_MODULE = CN()
    # The 2D map: "SparsePropMaxPool", cell (i, j) the element-wise max of clips i..j;
    # "SparsePropConv", a learned chain of 1D convolutions (a 1 x 1 conv gives the diagonal).
    node.PROP_MODULE.NAME = "SparsePropMaxPool"
    # Layers per scale: scale 0 fills diagonals 0 .. L0 - 1 at stride 1; each later scale
    # doubles the stride and fills L more diagonals (docs/tan_msra.md §1).
    node.PROP_MODULE.NUM_SCALE_LAYERS = [16, 8, 8, 8]

    node.FUSION_MODULE = CN()
    # Hq: size of the sentence vector (summed over directions when bidirectional).
    node.FUSION_MODULE.TXT_HIDDEN_SIZE = 512
    node.FUSION_MODULE.LSTM = CN()
    # Stacked LSTM layers of the sentence encoder.
    node.FUSION_MODULE.LSTM.NUM_LAYERS = 3
    # Bidirectional LSTM (each direction then has TXT_HIDDEN_SIZE // 2 units).
    node.FUSION_MODULE.LSTM.BIDIRECTIONAL = False

    node.MAP_MODULE = CN()
    # Output channels of each 2D convolution over the fused map (one entry per layer).
    node.MAP_MODULE.HIDDEN_SIZES = [512] * 8
    # Kernel of each convolution.
    node.MAP_MODULE.KERNEL_SIZES = [5] * 8
    # Stride of each convolution.
    node.MAP_MODULE.STRIDES = [1] * 8
    # Zero padding of each convolution; the stack must return an N x N map.
    node.MAP_MODULE.PADDINGS = [16, 0, 0, 0, 0, 0, 0, 0]
    # Dilation of each convolution.
    node.MAP_MODULE.DILATIONS = [1] * 8
    # (tan) Compute each conv only over row strips of this many rows that cover the
    # cells the valid outputs depend on; used when the stack has the released form
    # (one kernel, stride and dilation 1, all the padding on the first layer); 0 runs the
    # dense convs of the reference. Same results up to float rounding.
    node.MAP_MODULE.STRIP_ROWS = 16


# Keys of the subtree that never change a result (the same convolutions, computed where needed).
RUNTIME_KEYS = ("MAP_MODULE.STRIP_ROWS",)


def pooling_counts(num_scale_layers):
    """The reference's layers per scale as the sparse map's counts (tan.modeling.map2d.feat2d):
    its first layer of scale 0 gives the diagonal, which the counts leave out."""
    return [num_scale_layers[0] - 1] + list(num_scale_layers[1:])


def largest_offset(num_scale_layers):
    """The longest moment's offset j - i that the layers reach."""
    return sum(count * 2 ** scale for scale, count in enumerate(pooling_counts(num_scale_layers)))


def conv_output_size(size, kernel, stride, padding, dilation):
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def released_form(node):
    """True when MAP_MODULE is a stack of one kernel, stride and dilation 1 and all its
    padding, (K - 1) * layers / 2, on the first layer: the form of every released file,
    which tan's row strips and weight maps (tan.modeling.map2d.strips) compute."""
    m = node.MAP_MODULE
    kernel, layers = m.KERNEL_SIZES[0], len(m.KERNEL_SIZES)
    return (all(k == kernel for k in m.KERNEL_SIZES) and all(s == 1 for s in m.STRIDES)
            and all(d == 1 for d in m.DILATIONS) and list(m.PADDINGS[1:]) == [0] * (layers - 1)
            and 2 * m.PADDINGS[0] == (kernel - 1) * layers)


def validate_tan_msra_config(cfg):
    node, key = cfg.MODEL.TAN_MSRA, (lambda k: f"MODEL.TAN_MSRA.{k}")
    check_counts(cfg, ("NUM_CLIPS", "FRAME_MODULE.INPUT_SIZE", "FRAME_MODULE.HIDDEN_SIZE", "FRAME_MODULE.KERNEL_SIZE",
                       "FRAME_MODULE.STRIDE", "FUSION_MODULE.TXT_HIDDEN_SIZE", "FUSION_MODULE.LSTM.NUM_LAYERS"))
    n, p = node.NUM_CLIPS, cfg.INPUT.NUM_PRE_CLIPS
    frame = node.FRAME_MODULE
    need(is_int(p) and p >= frame.KERNEL_SIZE, "INPUT.NUM_PRE_CLIPS",
         f"expected an integer >= {key('FRAME_MODULE.KERNEL_SIZE')} ({frame.KERNEL_SIZE}), got {p!r}")
    pooled = (p - frame.KERNEL_SIZE) // frame.STRIDE + 1
    need(pooled == n, key("FRAME_MODULE.STRIDE"),
         f"pooling {p} clips with kernel {frame.KERNEL_SIZE} and stride {frame.STRIDE} gives {pooled} clips, "
         f"not {key('NUM_CLIPS')} = {n}")
    need(node.TOKENS in TOKEN_RULES, key("TOKENS"),
         f"expected {' or '.join(repr(x) for x in TOKEN_RULES)}, got {node.TOKENS!r}")
    need(node.PROP_MODULE.NAME in PROP_NAMES, key("PROP_MODULE.NAME"),
         f"expected {' or '.join(repr(x) for x in PROP_NAMES)}, got {node.PROP_MODULE.NAME!r}")
    layers = list(node.PROP_MODULE.NUM_SCALE_LAYERS)
    need(layers and all(is_int(c) and c > 0 for c in layers), key("PROP_MODULE.NUM_SCALE_LAYERS"),
         f"expected a non-empty list of positive integers, got {layers}")
    need(largest_offset(layers) < n, key("PROP_MODULE.NUM_SCALE_LAYERS"),
         f"{layers} reaches offset {largest_offset(layers)}, which must stay below {key('NUM_CLIPS')} = {n}")
    if node.FUSION_MODULE.LSTM.BIDIRECTIONAL:
        need(node.FUSION_MODULE.TXT_HIDDEN_SIZE % 2 == 0, key("FUSION_MODULE.TXT_HIDDEN_SIZE"),
             "must be even when the LSTM is bidirectional (it is split between the two directions)")
    validate_map_module(node, n, key)
    loss = node.LOSS
    need(0.0 <= loss.MIN_IOU < loss.MAX_IOU <= 1.0, key("LOSS.MIN_IOU"),
         f"need 0 <= MIN_IOU < MAX_IOU <= 1; got MIN_IOU {loss.MIN_IOU}, MAX_IOU {loss.MAX_IOU}")
    need(0.0 <= loss.BIAS <= 1.0, key("LOSS.BIAS"), f"expected a value in [0, 1], got {loss.BIAS}")
    need(node.CLIP_GRAD_NORM >= 0, key("CLIP_GRAD_NORM"), f"expected a value >= 0, got {node.CLIP_GRAD_NORM}")
    need(node.WEIGHT_DECAY >= 0, key("WEIGHT_DECAY"), f"expected a value >= 0, got {node.WEIGHT_DECAY}")


def validate_map_module(node, n, key):
    """The lists of MAP_MODULE: one entry per layer each, and a stack that returns an N x N map."""
    m = node.MAP_MODULE
    lists = {name: list(m[name]) for name in ("HIDDEN_SIZES", "KERNEL_SIZES", "STRIDES", "PADDINGS", "DILATIONS")}
    need(lists["HIDDEN_SIZES"], key("MAP_MODULE.HIDDEN_SIZES"), "expected at least one layer")
    for name, values in lists.items():
        need(len(values) == len(lists["HIDDEN_SIZES"]), key(f"MAP_MODULE.{name}"),
             f"expected {len(lists['HIDDEN_SIZES'])} entries, one per layer of HIDDEN_SIZES; got {values}")
        lowest = 0 if name == "PADDINGS" else 1
        need(all(is_int(v) and v >= lowest for v in values), key(f"MAP_MODULE.{name}"),
             f"expected integers >= {lowest}, got {values}")
    need(is_int(m.STRIP_ROWS) and m.STRIP_ROWS >= 0, key("MAP_MODULE.STRIP_ROWS"),
         f"expected an integer >= 0, got {m.STRIP_ROWS!r}")
    size = n
    for layer, geometry in enumerate(zip(*(lists[k] for k in ("KERNEL_SIZES", "STRIDES", "PADDINGS", "DILATIONS")))):
        size = conv_output_size(size, *geometry)
        need(size > 0, key("MAP_MODULE.KERNEL_SIZES"), f"the map is empty after layer {layer}")
    need(size == n, key("MAP_MODULE.PADDINGS"),
         f"the convolutions turn the {n} x {n} map into {size} x {size}; it must stay {n} x {n}")
