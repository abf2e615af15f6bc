"""The 2D-TAN meta-architecture: featpool -> feat2d -> integrator -> predictor."""
import torch

from .feat2d import build_feat2d
from .featpool import build_featpool
from .integrator import build_integrator
from .loss import build_loss
from .meta_arch import GroundingModel
from .predictor import build_predictor
from .registry import META_ARCH_REGISTRY


@META_ARCH_REGISTRY.register("TAN")
class TAN(GroundingModel):
    def __init__(self, cfg):
        super().__init__()
        self.featpool = build_featpool(cfg)
        self.feat2d = build_feat2d(cfg)
        mask2d = self.feat2d.mask2d
        self.integrator = build_integrator(cfg)
        self.predictor = build_predictor(cfg, mask2d)
        self.loss = build_loss(cfg, mask2d)

    def encode_video(self, feats):
        """feats [B, P, D_in] -> the 2D map of candidate moments [B, H, N, N]: the
        sentence-independent half, computed once per video when many sentences ask about it."""
        return self.feat2d(self.featpool(feats))

    def ground(self, map2d, queries, wordlens, video_index=None):
        """map2d [V, H, N, N], queries [B, L, E], wordlens [B] -> logits [B, N, N].
        Sentence b asks about video ``video_index[b]``; without an index, about
        video b, or about the only one (V = 1, shared through broadcasting)."""
        if video_index is not None:
            map2d = map2d[video_index]
        fused = self.integrator(queries, wordlens, map2d)  # [B, H, N, N]
        return self.predictor(fused)

    def scores(self, logits):
        """Inference scores: sigmoid, zero outside the valid cells."""
        return torch.sigmoid(logits.float()) * self.mask2d

    def losses(self, logits, batch):
        """The scaled-IoU BCE (docs/model.md §6)."""
        return {"loss": self.loss(logits, batch["windows"], batch["durations"])}
