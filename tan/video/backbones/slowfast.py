"""SlowFast R50 8x8 as the released features were made with it (HERO's
extractor): each clip's 32 frames (tan/video/release_sampling.py chooses
them) scaled to [0, 1], minus 0.45, over 0.225 (+1e-8), every channel; the
slow pathway takes 8 of them (``linspace(0, 31, 8)``: frames 0, 4, 8, 13,
17, 22, 26, 31); BatchNorm in eval mode, so a row depends on its clip alone;
the row is the 2304 values of the last stage's averages, slow (2048) then
fast (256). Weights: PySlowFast's ``SLOWFAST_8x8_R50.pkl`` (tan/video/weights/caffe2.py)."""
import os

import numpy as np
import torch

from ..networks.slowfast import SlowFast, SlowFastShape
from ..weights.caffe2 import load_slowfast, write_blobs
from . import register_video_backbone
from .base import FrameNormalizer, VideoBackbone, weights_digest

MEAN, STD, EPS = [0.45] * 3, [0.225] * 3, 1e-8
SLOW_FRAMES = torch.linspace(0, 31, 8).long()
CPU_PIECE = 2  # clips through the network at a time on a CPU


@register_video_backbone("slowfast")
class SlowFastClips(VideoBackbone):
    frames_per_clip = 32

    def __init__(self, model_name, device, dtype=torch.float32, resolution=224):
        super().__init__(model_name, device, dtype)
        self.resolution = int(resolution)  # HERO's 224; any size gives a row (the averages are global)
        network = load_slowfast(model_name)
        self.weights = weights_digest(network, statistics=True)
        # Channels-last 3D tensors let oneDNN and cuDNN skip a layout change around every convolution
        # (0.88 s a clip instead of 1.12 on 2 EPYC cores; the rows agree to 2e-7)
        self.network = network.to(device=self.device, dtype=dtype, memory_format=torch.channels_last_3d)
        self.dim = network.shape.dim
        self.normalize = FrameNormalizer(MEAN, STD, self.device, dtype, eps=EPS)

    @torch.no_grad()
    def encode(self, frames):
        # On a CPU the activations of a few clips stay in cache: 2 clips at a time took 0.76 s a clip on 2 EPYC
        # cores, 16 at a time 1.07 s. BatchNorm in eval mode makes a row its clip's alone, so pieces change nothing.
        piece = CPU_PIECE if self.device.type == "cpu" else len(frames)
        rows = [self._encode(frames[i:i + piece]) for i in range(0, len(frames), max(piece, 1))]
        return np.concatenate(rows) if rows else np.zeros((0, self.dim), np.float32)

    def _encode(self, frames):
        fast = self.normalize(frames).transpose(1, 2)  # [K, 32, 3, S, S] -> [K, 3, 32, S, S]
        slow = fast.index_select(2, SLOW_FRAMES.to(fast.device)).contiguous(memory_format=torch.channels_last_3d)
        fast = fast.contiguous(memory_format=torch.channels_last_3d)
        return self.network(slow, fast).float().cpu().numpy()

    @classmethod
    def options_of(cls, record):
        return {"resolution": record.get("resolution", 224)}

    @classmethod
    def write_tiny(cls, path, seed=0):
        """A SlowFast R50 8x8 of width 8 (288-d rows) with random weights and BatchNorm statistics,
        written as a Caffe2 pickle like the published file."""
        torch.manual_seed(seed)
        network = SlowFast(SlowFastShape(width=8, classes=10))
        with torch.no_grad():
            for name, buffer in network.named_buffers():
                if name.endswith("running_mean"):
                    buffer.normal_(0, 0.1)
                elif name.endswith("running_var"):
                    buffer.uniform_(0.5, 1.5)
            for name, parameter in network.named_parameters():
                if name.endswith("bn.weight") or name.endswith("_bn.weight"):
                    parameter.uniform_(0.5, 1.5)
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        write_blobs(network, path)
