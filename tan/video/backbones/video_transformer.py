"""A Hugging Face video transformer (VideoMAE, TimeSformer, ViViT: any model
that ``AutoModel`` loads and that takes ``pixel_values`` [B, T, 3, S, S]) as
the motion stream: each clip's T frames go through it once, and the clip's
row is the mean of its last layer's tokens (how VideoMAE's classifier pools)."""
import os

import torch

from . import register_video_backbone
from .base import (FrameNormalizer, VideoBackbone, load_pretrained, preprocessor_settings, quiet_transformers,
                   require_transformers, weights_digest, write_preprocessor)

IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]


@register_video_backbone("video_transformer")
class VideoTransformer(VideoBackbone):
    def __init__(self, model_name, device, dtype=torch.float32):
        super().__init__(model_name, device, dtype)
        require_transformers()
        from transformers import AutoModel

        model = load_pretrained(AutoModel, model_name, "video model").eval()
        config = model.config
        if not hasattr(config, "num_frames") or not hasattr(config, "image_size"):
            raise_not_video(model_name, type(model).__name__)
        self.weights = weights_digest(model)
        self.model = model.to(device=self.device, dtype=dtype)
        self.frames_per_clip = int(config.num_frames)
        size = config.image_size
        self.resolution = int(size if isinstance(size, int) else size[0])
        self.dim = int(config.hidden_size)
        mean, std = preprocessor_settings(model_name, IMAGENET_MEAN, IMAGENET_STD)
        self.normalize = FrameNormalizer(mean, std, self.device, dtype)

    @torch.no_grad()
    def encode(self, frames):
        tokens = self.model(pixel_values=self.normalize(frames)).last_hidden_state
        return tokens.float().mean(1).cpu().numpy()

    @classmethod
    def write_tiny(cls, folder, seed=0):
        """A VideoMAE of 2 layers of width 32 over 4 frames of 32 x 32."""
        require_transformers()
        from transformers import VideoMAEConfig, VideoMAEModel

        os.makedirs(folder, exist_ok=True)
        quiet_transformers()
        torch.manual_seed(seed)
        config = VideoMAEConfig(image_size=32, patch_size=8, num_frames=4, tubelet_size=2, hidden_size=32,
                                intermediate_size=64, num_hidden_layers=2, num_attention_heads=2)
        VideoMAEModel(config).save_pretrained(folder)
        write_preprocessor(folder, IMAGENET_MEAN, IMAGENET_STD, 32)


def raise_not_video(name, kind):
    from ...errors import TanError

    raise TanError(f"video model {name!r} loads as {kind}, which has no num_frames / image_size in its config: "
                   f"expected a video transformer (VideoMAE, TimeSformer, ViViT)")
