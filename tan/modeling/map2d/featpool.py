"""Clip features -> N pooled clips (docs/model.md §2)."""
from torch import nn

from ...config.architecture import model_settings


class FeatAvgPool(nn.Module):
    def __init__(self, input_size, hidden_size, kernel_size, stride):
        super().__init__()
        self.conv = nn.Conv1d(input_size, hidden_size, 1)
        self.pool = nn.AvgPool1d(kernel_size, stride)

    def forward(self, x):
        # x: [B, P, D_in] -> [B, D_in, P]
        x = x.transpose(1, 2)
        return self.pool(self.conv(x).relu())  # [B, H, N]


def build_featpool(cfg):
    arch = model_settings(cfg)
    stride = cfg.INPUT.NUM_PRE_CLIPS // arch.NUM_CLIPS
    return FeatAvgPool(arch.FEATPOOL.INPUT_SIZE, arch.FEATPOOL.HIDDEN_SIZE, arch.FEATPOOL.KERNEL_SIZE, stride)
