"""Clip features -> N pooled clips (docs/model.md §2)."""
from torch import nn


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
    tan = cfg.MODEL.TAN
    stride = cfg.INPUT.NUM_PRE_CLIPS // tan.NUM_CLIPS
    return FeatAvgPool(tan.FEATPOOL.INPUT_SIZE, tan.FEATPOOL.HIDDEN_SIZE, tan.FEATPOOL.KERNEL_SIZE, stride)
