"""SlowFast ResNet (Feichtenhofer et al., 2019) as a feature network, with the
parameter names of PySlowFast's ``SlowFast`` model, so that its published
weights load name for name (tan/video/weights/caffe2.py).

Two pathways see one clip: the slow one 1/alpha of the frames at full width,
the fast one every frame at 1/beta of the width. After the stem and each of
the first three residual stages a strided temporal convolution carries the
fast pathway into the slow one (concatenated). The feature of a clip is the
global average of the last stage of each pathway, slow then fast: for R50
8x8, 2048 + 256 = 2304 values (the classifier that follows in the published
model is loaded but not used).
"""
from dataclasses import dataclass

import torch
from torch import nn

# Temporal kernel of each stage's convolutions, (slow, fast): stem, res2 .. res5.
TEMPORAL_KERNELS = ((1, 5), (1, 3), (1, 3), (3, 3), (3, 3))
BLOCKS = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3)}
BN_EPS = 1e-5


@dataclass(frozen=True)
class SlowFastShape:
    """The sizes that tell one SlowFast ResNet from another: R50 8x8 is the default."""
    depth: int = 50
    width: int = 64  # channels of the slow stem; each stage's bottleneck is width x 2^(stage - 2)
    alpha: int = 4  # fast frames per slow frame
    beta_inv: int = 8  # slow channels per fast channel
    fusion_ratio: int = 2  # fused channels per fast channel
    fusion_kernel: int = 7  # temporal kernel of the fast-to-slow convolution
    classes: int = 400  # the published model's classifier (kept so that its weights load)

    @property
    def dim(self):
        return self.width * 32 + self.width * 32 // self.beta_inv


def _conv(in_channels, out_channels, kernel, stride=(1, 1, 1), padding=(0, 0, 0)):
    return nn.Conv3d(in_channels, out_channels, kernel, stride=stride, padding=padding, bias=False)


def _bn(channels):
    return nn.BatchNorm3d(channels, eps=BN_EPS)


class Stem(nn.Module):
    def __init__(self, in_channels, out_channels, temporal):
        super().__init__()
        self.conv = _conv(in_channels, out_channels, (temporal, 7, 7), (1, 2, 2), (temporal // 2, 3, 3))
        self.bn = _bn(out_channels)
        self.pool_layer = nn.MaxPool3d((1, 3, 3), (1, 2, 2), (0, 1, 1))

    def forward(self, x):
        return self.pool_layer(torch.relu(self.bn(self.conv(x))))


class Stems(nn.Module):
    def __init__(self, shape):
        super().__init__()
        fast = shape.width // shape.beta_inv
        self.pathway0_stem = Stem(3, shape.width, TEMPORAL_KERNELS[0][0])
        self.pathway1_stem = Stem(3, fast, TEMPORAL_KERNELS[0][1])

    def forward(self, slow, fast):
        return self.pathway0_stem(slow), self.pathway1_stem(fast)


class FastToSlow(nn.Module):
    """The fast pathway, strided in time to the slow one's frame rate, concatenated to it."""

    def __init__(self, fast_channels, shape):
        super().__init__()
        k = shape.fusion_kernel
        self.conv_f2s = _conv(fast_channels, fast_channels * shape.fusion_ratio, (k, 1, 1), (shape.alpha, 1, 1),
                              (k // 2, 0, 0))
        self.bn = _bn(fast_channels * shape.fusion_ratio)

    def forward(self, slow, fast):
        return torch.cat([slow, torch.relu(self.bn(self.conv_f2s(fast)))], 1), fast


class Bottleneck(nn.Module):
    def __init__(self, in_channels, inner, out_channels, temporal, stride):
        super().__init__()
        self.a = _conv(in_channels, inner, (temporal, 1, 1), padding=(temporal // 2, 0, 0))
        self.a_bn = _bn(inner)
        self.b = _conv(inner, inner, (1, 3, 3), (1, stride, stride), (0, 1, 1))
        self.b_bn = _bn(inner)
        self.c = _conv(inner, out_channels, (1, 1, 1))
        self.c_bn = _bn(out_channels)

    def forward(self, x):
        x = torch.relu(self.a_bn(self.a(x)))
        x = torch.relu(self.b_bn(self.b(x)))
        return self.c_bn(self.c(x))


class ResBlock(nn.Module):
    def __init__(self, in_channels, inner, out_channels, temporal, stride):
        super().__init__()
        if in_channels != out_channels or stride != 1:
            self.branch1 = _conv(in_channels, out_channels, (1, 1, 1), (1, stride, stride))
            self.branch1_bn = _bn(out_channels)
        self.branch2 = Bottleneck(in_channels, inner, out_channels, temporal, stride)

    def forward(self, x):
        shortcut = self.branch1_bn(self.branch1(x)) if hasattr(self, "branch1") else x
        return torch.relu(shortcut + self.branch2(x))


class ResStage(nn.Module):
    """Stage ``stage`` (2 to 5) of both pathways: blocks ``pathway{p}_res{i}``."""

    def __init__(self, stage, in_channels, shape):
        super().__init__()
        stride = 1 if stage == 2 else 2
        inner = shape.width * 2 ** (stage - 2)
        for p, divisor in enumerate((1, shape.beta_inv)):
            channels = in_channels[p]
            for i in range(BLOCKS[shape.depth][stage - 2]):
                block = ResBlock(channels, inner // divisor, inner * 4 // divisor, TEMPORAL_KERNELS[stage - 1][p],
                                 stride if i == 0 else 1)
                self.add_module(f"pathway{p}_res{i}", block)
                channels = inner * 4 // divisor
        self.blocks = BLOCKS[shape.depth][stage - 2]

    def forward(self, slow, fast):
        for i in range(self.blocks):
            slow, fast = getattr(self, f"pathway0_res{i}")(slow), getattr(self, f"pathway1_res{i}")(fast)
        return slow, fast


class Head(nn.Module):
    """Each pathway averaged over time and space, slow then fast; ``projection`` is the published
    classifier, loaded with the weights and not applied."""

    def __init__(self, shape):
        super().__init__()
        self.projection = nn.Linear(shape.dim, shape.classes)

    def forward(self, slow, fast):
        return torch.cat([slow.mean((2, 3, 4)), fast.mean((2, 3, 4))], 1)


class SlowFast(nn.Module):
    """``forward(slow [B, 3, T / alpha, S, S], fast [B, 3, T, S, S])`` -> [B, dim] features."""

    def __init__(self, shape=SlowFastShape()):
        super().__init__()
        if shape.depth not in BLOCKS:
            raise ValueError(f"SlowFast depth {shape.depth}: expected one of {sorted(BLOCKS)}")
        self.shape = shape
        fast, fused = shape.width // shape.beta_inv, shape.width // shape.beta_inv * shape.fusion_ratio
        self.s1 = Stems(shape)
        self.s1_fuse = FastToSlow(fast, shape)
        slow_in = shape.width + fused
        for stage in range(2, 6):
            out = shape.width * 2 ** (stage - 2) * 4
            self.add_module(f"s{stage}", ResStage(stage, (slow_in, fast), shape))
            fast = out // shape.beta_inv
            if stage < 5:
                self.add_module(f"s{stage}_fuse", FastToSlow(fast, shape))
            slow_in = out + fast * shape.fusion_ratio
        self.head = Head(shape)

    def forward(self, slow, fast):
        slow, fast = self.s1(slow, fast)
        slow, fast = self.s1_fuse(slow, fast)
        for stage in range(2, 6):
            slow, fast = getattr(self, f"s{stage}")(slow, fast)
            if stage < 5:
                slow, fast = getattr(self, f"s{stage}_fuse")(slow, fast)
        return self.head(slow, fast)
