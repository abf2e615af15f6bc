"""microsoft/2D-TAN (the paper's own code) as MODEL.ARCHITECTURE "TAN_MSRA" (docs/tan_msra.md).

frame module (1 x 1 conv, relu, average pool) -> proposal map (sparse max-pool
or conv) -> fusion (sentence LSTM x 1 x 1 conv of the map, L2-normalised over
channels, masked) -> map convs (relu, weight maps) -> pred (1 x 1 conv) ->
logits, masked. Built from tan's 2D-map pieces; its checkpoints load through
``adapt_state_dict`` (tan_msra/weights.py), its features are prepared as its
datasets prepare them (clips.py), its sentences split as its datasets split
them (words.py), and its evaluation ranks its proposals in its order
(ranking.py).
"""
import torch
from torch.nn import functional as F

from ...config.models import Recipe, TextInputChoice, register_model
from ...structures.moments import best_moment_iou
from ..map2d.featpool import FeatAvgPool
from ..map2d.iou_loss import ScaledIoULoss
from ..meta_arch import GroundingModel
from ..tan2d.integrator import SentenceMapFusion
from .clips import AveragedClips
from .config import RUNTIME_KEYS, add_tan_msra_config, released_form, validate_tan_msra_config
from .foreign import convert, is_reference_file
from .map_conv import MapConv
from .maps import build_prop_map
from .ranking import ranked_candidates
from .weights import adapt_reference_state
from ..map2d.whitespace_words import ReferenceWords


class RescaledIoULoss(ScaledIoULoss):
    """The reference's bce_rescale_loss: targets (IoU - MIN_IOU) * (1 - BIAS) / (MAX_IOU - MIN_IOU),
    plus BIAS where positive, clamped to [0, 1]; the BCE of the valid cells, averaged (from the
    logits, where the reference takes the sigmoid first: the same value unless a probability
    underflows to 0 or 1).

    The IoU of a cell is its datasets': the cell's seconds ``(k * d) / N`` in the loss's dtype
    (float32, or float64 for a float64 model), the IoU in float64, then rounded to that dtype.
    (tan's ScaledIoULoss computes ``k * (d / N)`` and the IoU in float32.)"""

    def __init__(self, min_iou, max_iou, bias, mask2d):
        super().__init__(min_iou, max_iou, mask2d)
        self.bias = bias

    def targets(self, ious):
        scaled = (ious - self.min_iou) * (1 - self.bias) / (self.max_iou - self.min_iou)
        return torch.where(scaled > 0, scaled + self.bias, scaled).clamp(0, 1)

    def forward(self, logits, gt_moments, durations):
        # logits: [B, N, N]; gt_moments: [B, W, 2] seconds; durations: [B]
        dtype = torch.promote_types(logits.dtype, torch.float32)
        seconds = self.cell_bounds.to(dtype)[None] * durations.to(dtype)[:, None, None] / logits.shape[-1]
        ious = best_moment_iou(seconds.double(), gt_moments.double()[:, None, :, :]).to(dtype)
        selected = logits.flatten(1).index_select(1, self.cell_index).to(dtype)
        return F.binary_cross_entropy_with_logits(selected, self.targets(ious))


@register_model("TAN_MSRA")
class TanMsra(GroundingModel):
    """Trained on single queries with Adam, the gradient norm clipped at 10; sentences as
    GloVe vectors of its white-space words; clips averaged as its datasets average them."""
    RUNTIME_KEYS = RUNTIME_KEYS
    INPUT_SIZE_KEY = "FRAME_MODULE.INPUT_SIZE"

    add_config = staticmethod(add_tan_msra_config)
    validate_config = staticmethod(validate_tan_msra_config)

    @classmethod
    def text_input(cls, cfg):
        if cfg.INPUT.SENTENCE_FEATURES or cfg.MODEL.TAN_MSRA.TOKENS == "tan":
            return super().text_input(cfg)
        return TextInputChoice(ReferenceWords.NAME)  # "whitespace_words", registered by importing it

    @classmethod
    def clip_input(cls, cfg):
        return AveragedClips(cfg.INPUT.NUM_PRE_CLIPS, cfg.MODEL.TAN_MSRA.NORMALIZE)

    @classmethod
    def recipe(cls, cfg):
        node = cfg.MODEL.TAN_MSRA
        return Recipe("adam", betas=(0.9, 0.999), weight_decay=node.WEIGHT_DECAY, clip_grad_norm=node.CLIP_GRAD_NORM)

    @classmethod
    def from_foreign_config(cls, data, path):
        return convert(data, path) if is_reference_file(data) else None

    def __init__(self, cfg):
        super().__init__()
        node = cfg.MODEL.TAN_MSRA
        frame, fusion, maps = node.FRAME_MODULE, node.FUSION_MODULE, node.MAP_MODULE
        self.num_scale_layers = list(node.PROP_MODULE.NUM_SCALE_LAYERS)
        self.featpool = FeatAvgPool(frame.INPUT_SIZE, frame.HIDDEN_SIZE, frame.KERNEL_SIZE, frame.STRIDE)
        self.feat2d = build_prop_map(node)
        mask2d = self.feat2d.mask2d
        self.fusion = SentenceMapFusion(cfg.INPUT.PRE_QUERY_SIZE, fusion.TXT_HIDDEN_SIZE, frame.HIDDEN_SIZE,
                                        fusion.LSTM.NUM_LAYERS, fusion.LSTM.BIDIRECTIONAL)
        self.map_conv = MapConv(frame.HIDDEN_SIZE, maps.HIDDEN_SIZES, maps.KERNEL_SIZES, maps.STRIDES, maps.PADDINGS,
                                maps.DILATIONS, mask2d, maps.STRIP_ROWS, released_form(node))
        self.loss = RescaledIoULoss(node.LOSS.MIN_IOU, node.LOSS.MAX_IOU, node.LOSS.BIAS, mask2d)

    def encode_video(self, feats):
        """feats [V, P, D_in] -> the 2D map [V, H, N, N] (zero outside the valid cells)."""
        return self.feat2d(self.featpool(feats))

    def ground(self, map2d, queries, wordlens, video_index=None):
        """map2d [V, H, N, N], queries [S, L, E], wordlens [S] -> logits [S, N, N], zero outside the
        valid cells. Sentence s asks about video ``video_index[s]`` (None: video s, or the only one)."""
        if video_index is not None:
            map2d = map2d[video_index]
        fused = self.fusion(queries, wordlens, map2d) * self.mask2d  # the reference masks the fused map
        return self.map_conv(fused) * self.mask2d

    def scores(self, logits):
        """sigmoid, zero outside the valid cells (the reference's joint_prob)."""
        return torch.sigmoid(logits.float()) * self.mask2d

    def losses(self, logits, batch):
        return {"loss": self.loss(logits, batch["gt_moments"], batch["durations"])}

    def candidates(self, output, durations):
        """Every cell i <= j in the reference's order, with its float32 seconds (ranking.py)."""
        return ranked_candidates(self.scores(output), durations)

    def adapt_state_dict(self, state):
        """The reference's names (frame_layer, prop_layer, fusion_layer, map_layer, pred_layer) onto these."""
        return adapt_reference_state(state, self.num_scale_layers)
