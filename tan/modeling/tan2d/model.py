"""The 2D-TAN meta-architecture: featpool -> feat2d -> integrator -> predictor."""
import torch

from ...config.models import register_model
from ..map2d.band import to_band
from ..map2d.config import MAP_RUNTIME_KEYS
from ..map2d.feat2d import build_feat2d
from ..map2d.featpool import build_featpool
from ..map2d.iou_loss import ScaledIoULoss
from ..map2d.reference_files import CHENJOYA
from ..meta_arch import GroundingModel
from .config import add_tan_config, validate_tan_config
from ..map2d.definitions import runs_own_definition
from .integrator import FusedBand, SentenceMapFusion, build_integrator, fused_band_recipe
from .predictor import build_predictor


@register_model("TAN")
class TAN(GroundingModel):
    """Trained on single queries with Adam; sentences as word vectors (or
    precomputed sentence features); every declaration but the config is the
    contract's default."""
    RUNTIME_KEYS = MAP_RUNTIME_KEYS

    add_config = staticmethod(add_tan_config)
    validate_config = staticmethod(validate_tan_config)
    from_foreign_config = staticmethod(CHENJOYA.convert)  # chenjoya/2dtan's files, for tan-convert-config

    def __init__(self, cfg):
        super().__init__()
        self.featpool = build_featpool(cfg)
        self.feat2d = build_feat2d(cfg)
        mask2d = self.feat2d.mask2d
        self.integrator = build_integrator(cfg)
        self.predictor = build_predictor(cfg, mask2d)
        self.loss = ScaledIoULoss(cfg.MODEL.TAN.LOSS.MIN_IOU, cfg.MODEL.TAN.LOSS.MAX_IOU, mask2d)

    def encode_video(self, feats):
        """feats [B, P, D_in] -> the 2D map of candidate moments [B, H, N, N]: the
        sentence-independent half, computed once per video when many sentences ask about it."""
        return self.feat2d(self.featpool(feats))

    def ground(self, map2d, queries, wordlens, video_index=None):
        """map2d [V, H, N, N], queries [B, L, E], wordlens [B] -> logits [B, N, N].
        Sentence b asks about video ``video_index[b]``; without an index, about
        video b, or about the only one (V = 1, shared through broadcasting)."""
        if self.predictor.stores_bands and runs_own_definition(self.integrator, SentenceMapFusion, "fuse"):
            return self._ground_in_bands(map2d, queries, wordlens, video_index)
        if video_index is not None:
            map2d = map2d[video_index]
        fused = self.integrator(queries, wordlens, map2d)  # [B, H, N, N]
        return self.predictor(fused)

    def _ground_in_bands(self, map2d, queries, wordlens, video_index):
        """:meth:`ground` for training: the same operations, but what autograd keeps is
        compact: the map's valid cells, the sentence and one band per predictor layer."""
        predictor = self.predictor
        cells = to_band(map2d, predictor.valid_cells)  # the map is zero elsewhere
        sentence = self.integrator.sentence(queries, wordlens)
        if video_index is None and cells.shape[0] == 1 < sentence.shape[0]:  # one video for all sentences
            video_index = torch.zeros(sentence.shape[0], dtype=torch.long, device=cells.device)
        where = (predictor.valid_cells, self.mask2d.shape[-1], video_index, predictor.input_cells)
        inputs = (cells, sentence, self.integrator.conv.weight, self.integrator.conv.bias, where)
        # The fused band, the first layer's input, is as wide as a layer's band, and the fusion
        # is cheap beside a layer: the first layer computes it again in its backward.
        return predictor.forward_band(FusedBand.apply(*inputs), rebuild_input=fused_band_recipe(*inputs))

    def scores(self, logits):
        """Inference scores: sigmoid, zero outside the valid cells."""
        return torch.sigmoid(logits.float()) * self.mask2d

    def losses(self, logits, batch):
        """The scaled-IoU BCE (docs/model.md §6)."""
        return {"loss": self.loss(logits, batch["gt_moments"], batch["durations"])}
