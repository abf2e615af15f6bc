"""MS-2D-TAN's settings, MODEL.MS_TAN (docs/ms2dtan.md §2). The defaults are
its Charades-STA I3D experiment's; tan-convert-config writes the others from
its experiment files (tan/modeling/ms2dtan/foreign.py)."""
from yacs.config import CfgNode as CN

from ...config.models import need
from ...config.setup import is_int

PROP_NAMES = ("conv", "pool")
TOKEN_RULES = ("tan", "whitespace")
MAP_NAMES = ("gated", "conv")


def add_ms_tan_config(cfg):
    node = cfg.MODEL.MS_TAN = CN()
    # Feature rows of a training window (SLIDING_WINDOW) or rows sampled from every
    # video (otherwise): the reference's DATASET.INPUT_NUM_CLIPS.
    node.NUM_CLIPS = 64
    # True: train on windows of NUM_CLIPS consecutive rows at the features' own rate and
    # evaluate on whole videos (Charades-STA, TACoS); False: sample NUM_CLIPS rows of each
    # video, the middle row of each bucket (ActivityNet).
    node.SLIDING_WINDOW = True
    # Seconds per feature row (the reference's DATASET.TIME_UNIT); moments of a sliding
    # window are in these units.
    node.TIME_UNIT = 0.64
    # L2-normalise each feature row before anything else.
    node.NORMALIZE = True
    # How a sentence becomes words: "tan", tan's tokens (punctuation split off, as its
    # TACoS and ActivityNet readers' NLTK tokens nearly do); "whitespace", the words of
    # sentence.split(), lower-cased, as its Charades-STA reader reads them.
    node.TOKENS = "tan"
    add_module_keys(node)
    node.LOSS = CN()
    # Temporal IoU mapped to target 0 (and below).
    node.LOSS.MIN_IOU = 0.5
    # Temporal IoU mapped to target 1 (and above).
    node.LOSS.MAX_IOU = 1.0
    # Added to every positive target (then capped at 1): the loss's BIAS.
    node.LOSS.BIAS = 0.0


def add_module_keys(node):
    """The modules' keys, named as its experiment files name them (docs/ms2dtan.md §2)."""
    node.CLIP_MODULE = CN()
    # D_in: width of the clip features.
    node.CLIP_MODULE.INPUT_SIZE = 1024
    # H: channels of the clips, of every map and of the fused maps.
    node.CLIP_MODULE.HIDDEN_SIZE = 512
    # Average pooling of the rows after the 1 x 1 conv (4 or 6 on VGG frame features).
    node.CLIP_MODULE.KERNEL_SIZE = 1
    # Its stride.
    node.CLIP_MODULE.STRIDE = 1

    node.PROP_MODULE = CN()
    # How each scale's start x duration map is built from the clips: "conv", chains of
    # 1D conv + batch norm + tanh; "pool", chains of max pools.
    node.PROP_MODULE.NAME = "conv"
    # Layers of each scale's chain, finest first: scale 0 has NUM_LAYERS[0] durations;
    # scale s > 0 (cells of 2**s clips) copies half of its 2 * NUM_LAYERS[s] durations from
    # scale s - 1, so NUM_LAYERS is [2n, n, n, ...].
    node.PROP_MODULE.NUM_LAYERS = [16, 8, 8]

    node.FUSION_MODULE = CN()
    # Size of the sentence vector (summed over directions when bidirectional).
    node.FUSION_MODULE.TXT_HIDDEN_SIZE = 512
    # Stacked LSTM layers of the sentence encoder.
    node.FUSION_MODULE.TXT_NUM_LAYERS = 3
    # Bidirectional LSTM (each direction has TXT_HIDDEN_SIZE // 2 units).
    node.FUSION_MODULE.TXT_BIDIRECTIONAL = True

    node.MAP_MODULE = CN()
    # The convolutions over each fused map: "gated", relu(conv) times a sigmoid gate conv;
    # "conv", plain relu convs (the single-scale DS-2D-TAN experiment).
    node.MAP_MODULE.NAME = "gated"
    # Channels of each map convolution.
    node.MAP_MODULE.HIDDEN_SIZES = [512, 512]
    # Kernel of each map convolution.
    node.MAP_MODULE.KERNEL_SIZES = [17, 17]
    # Zero padding of each; a map keeps its size, so 2 * PADDING + 1 = KERNEL.
    node.MAP_MODULE.PADDINGS = [8, 8]


def anchor_counts(num_layers):
    """Durations of each scale's map: NUM_LAYERS[0], then 2 * NUM_LAYERS[s] (half copied from the finer scale)."""
    return [n if s == 0 else 2 * n for s, n in enumerate(num_layers)]


def chain_lengths(num_clips, kernel, stride, num_layers):
    """Rows of the pooled clips and the length each scale's chain leaves (< 1: too short)."""
    rows = (num_clips - kernel) // stride + 1
    length, left = rows, []
    for scale, layers in enumerate(num_layers):
        length = length if scale == 0 else (length - 3) // 2 + 1
        length -= layers - 1
        left.append(length)
    return rows, left


def validate_ms_tan_config(cfg):
    node = cfg.MODEL.MS_TAN
    key = "MODEL.MS_TAN."
    for name in ("NUM_CLIPS", "CLIP_MODULE.INPUT_SIZE", "CLIP_MODULE.HIDDEN_SIZE", "CLIP_MODULE.KERNEL_SIZE",
                 "CLIP_MODULE.STRIDE", "FUSION_MODULE.TXT_HIDDEN_SIZE", "FUSION_MODULE.TXT_NUM_LAYERS"):
        value = node[name.split(".")[0]] if "." not in name else node[name.split(".")[0]][name.split(".")[1]]
        need(is_int(value) and value > 0, key + name, f"expected a positive integer, got {value!r}")
    need(node.TOKENS in TOKEN_RULES, key + "TOKENS", f"expected one of {', '.join(TOKEN_RULES)}, got {node.TOKENS!r}")
    need(node.PROP_MODULE.NAME in PROP_NAMES, key + "PROP_MODULE.NAME",
         f"expected one of {', '.join(PROP_NAMES)}, got {node.PROP_MODULE.NAME!r}")
    need(node.MAP_MODULE.NAME in MAP_NAMES, key + "MAP_MODULE.NAME",
         f"expected one of {', '.join(MAP_NAMES)}, got {node.MAP_MODULE.NAME!r}")
    layers = list(node.PROP_MODULE.NUM_LAYERS)
    need(layers and all(is_int(n) and n > 0 for n in layers) and all(2 * n == layers[0] for n in layers[1:]),
         key + "PROP_MODULE.NUM_LAYERS", f"expected positive counts [2n, n, n, ...] (a coarser scale copies half "
         f"its durations from the finer one), got {layers}")
    need(node.CLIP_MODULE.KERNEL_SIZE == node.CLIP_MODULE.STRIDE, key + "CLIP_MODULE.KERNEL_SIZE",
         f"the clip pool's kernel and stride must be equal (as in every MS-2D-TAN experiment), got "
         f"{node.CLIP_MODULE.KERNEL_SIZE} and {node.CLIP_MODULE.STRIDE}")
    rows, left = chain_lengths(node.NUM_CLIPS, node.CLIP_MODULE.KERNEL_SIZE, node.CLIP_MODULE.STRIDE, layers)
    need(rows % 2 ** (len(layers) - 1) == 0 and min(left) >= 1, key + "NUM_CLIPS",
         f"{node.NUM_CLIPS} rows pool to {rows} clips, which must be a multiple of {2 ** (len(layers) - 1)} and "
         f"long enough for the chains of PROP_MODULE.NUM_LAYERS {layers}")
    longest = max(anchors * 2 ** s for s, anchors in enumerate(anchor_counts(layers)))
    need(longest <= rows, key + "PROP_MODULE.NUM_LAYERS",
         f"its longest moment ({longest} clips) exceeds the {rows} clips of NUM_CLIPS / CLIP_MODULE.STRIDE")
    sizes = [list(node.MAP_MODULE[k]) for k in ("HIDDEN_SIZES", "KERNEL_SIZES", "PADDINGS")]
    need(sizes[0] and len({len(s) for s in sizes}) == 1, key + "MAP_MODULE.HIDDEN_SIZES",
         f"HIDDEN_SIZES, KERNEL_SIZES and PADDINGS need one entry per convolution, got {sizes}")
    need(all(is_int(k) and is_int(p) and k == 2 * p + 1 for k, p in zip(sizes[1], sizes[2])),
         key + "MAP_MODULE.PADDINGS", f"each map keeps its size: PADDING = (KERNEL - 1) / 2, got kernels "
         f"{sizes[1]} and paddings {sizes[2]}")
    need(not node.FUSION_MODULE.TXT_BIDIRECTIONAL or node.FUSION_MODULE.TXT_HIDDEN_SIZE % 2 == 0,
         key + "FUSION_MODULE.TXT_HIDDEN_SIZE", "must be even with a bidirectional LSTM")
    need(not node.SLIDING_WINDOW or node.TIME_UNIT > 0, key + "TIME_UNIT",
         f"sliding windows need the seconds per feature row, got {node.TIME_UNIT}")
    need(0.0 <= node.LOSS.MIN_IOU < node.LOSS.MAX_IOU <= 1.0, key + "LOSS.MIN_IOU",
         f"need 0 <= MIN_IOU < MAX_IOU <= 1, got {node.LOSS.MIN_IOU}, {node.LOSS.MAX_IOU}")
    need(0.0 <= node.LOSS.BIAS < 1.0, key + "LOSS.BIAS", f"expected 0 <= BIAS < 1, got {node.LOSS.BIAS}")
