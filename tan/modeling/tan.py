"""The 2D-TAN meta-architecture: featpool -> feat2d -> integrator -> predictor."""
import torch
from torch import nn

from .feat2d import build_feat2d
from .featpool import build_featpool
from .integrator import build_integrator
from .loss import build_loss
from .predictor import build_predictor
from .registry import META_ARCH_REGISTRY


@META_ARCH_REGISTRY.register("TAN")
class TAN(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.featpool = build_featpool(cfg)
        self.feat2d = build_feat2d(cfg)
        mask2d = self.feat2d.mask2d
        self.integrator = build_integrator(cfg)
        self.predictor = build_predictor(cfg, mask2d)
        self.loss = build_loss(cfg, mask2d)

    @property
    def mask2d(self):
        return self.feat2d.mask2d

    def forward(self, feats, queries, wordlens):
        """feats [B, P, D_in], queries [B, L, E], wordlens [B] -> logits [B, N, N]."""
        return self.ground(self.encode_video(feats), queries, wordlens)

    def encode_video(self, feats):
        """feats [B, P, D_in] -> the 2D map of candidate moments [B, H, N, N]: the
        sentence-independent half, computed once per video when many sentences ask about it."""
        return self.feat2d(self.featpool(feats))

    def ground(self, map2d, queries, wordlens):
        """map2d [B or 1, H, N, N], queries [B, L, E], wordlens [B] -> logits [B, N, N].
        One video's map (batch 1) is shared by all B sentences through broadcasting."""
        fused = self.integrator(queries, wordlens, map2d)  # [B, H, N, N]
        return self.predictor(fused)

    def scores(self, logits):
        """Inference scores: sigmoid, zero outside the valid cells."""
        return torch.sigmoid(logits.float()) * self.mask2d
