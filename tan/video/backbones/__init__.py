"""Feature backbones, registered by name: models that turn clips of frames (a
video backbone) or sentences (a text backbone) into feature rows.

Built in: "clip" (CLIP's image encoder, and its text encoder for queries) and
"video_transformer" (a Hugging Face video model such as VideoMAE, TimeSformer
or ViViT), both through ``transformers``. A plug-in adds one with
:func:`register_video_backbone` or :func:`register_text_backbone`.

Every backbone is built from a model name (a local folder or a hub name), a
device and a dtype, and records what made its features (:meth:`record`), so
that a trained model can make the same features again.
"""
from ...errors import TanError
from ...utils.registry import Registry
from .base import TextBackbone, VideoBackbone, weights_digest

VIDEO_BACKBONES = Registry("video backbone")
TEXT_BACKBONES = Registry("text backbone")


def register_video_backbone(name):
    """Class decorator: register a :class:`VideoBackbone` under ``name``."""
    def deco(cls):
        cls.NAME = name
        return VIDEO_BACKBONES.register(name)(cls)
    return deco


def register_text_backbone(name):
    """Class decorator: register a :class:`TextBackbone` under ``name``."""
    def deco(cls):
        cls.NAME = name
        return TEXT_BACKBONES.register(name)(cls)
    return deco


def video_backbone(name):
    _load_builtins()
    return VIDEO_BACKBONES.get(name)


def text_backbone(name):
    _load_builtins()
    return TEXT_BACKBONES.get(name)


def tiny_writer(name):
    """``write_tiny(folder, seed)`` of backbone ``name``: the video backbone's, else the text one's
    (a model such as CLIP serves both and writes the same folder)."""
    _load_builtins()
    if name not in VIDEO_BACKBONES and name not in TEXT_BACKBONES:
        raise TanError(f"unknown backbone {name!r}; registered: {', '.join(backbone_names())}")
    registry = VIDEO_BACKBONES if name in VIDEO_BACKBONES else TEXT_BACKBONES
    return registry.get(name).write_tiny


def backbone_names():
    _load_builtins()
    return sorted(set(VIDEO_BACKBONES.names()) | set(TEXT_BACKBONES.names()))


def _load_builtins():
    from . import clip, slowfast, video_transformer  # noqa: F401  (they register themselves)


__all__ = ["TextBackbone", "VideoBackbone", "register_text_backbone", "register_video_backbone", "text_backbone",
           "video_backbone", "tiny_writer", "backbone_names", "weights_digest"]
