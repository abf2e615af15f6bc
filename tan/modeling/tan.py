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
        clips = self.featpool(feats)  # [B, H, N]
        map2d = self.feat2d(clips)  # [B, H, N, N]
        fused = self.integrator(queries, wordlens, map2d)  # [B, H, N, N]
        return self.predictor(fused)  # [B, N, N]

    def scores(self, logits):
        """Inference scores: sigmoid, zero outside the valid cells."""
        return torch.sigmoid(logits.float()) * self.mask2d
