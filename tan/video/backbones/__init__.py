"""Feature backbones, registered by name: models that turn clips of frames (a
video backbone) or sentences (a text backbone) into feature rows.

Built in, one module each in this package (imported when a backbone is first
looked up or registered, so that importing the package stays cheap): "clip"
(CLIP's image encoder, and its text encoder for queries), "slowfast" (SlowFast
R50 8x8, as the released features were made) and "video_transformer" (a Hugging
Face video model such as VideoMAE, TimeSformer or ViViT). A plug-in adds one with
:func:`register_video_backbone` or :func:`register_text_backbone` when it is
imported (``tan-extract-features --plugins``, a config's ``PLUGINS``;
docs/video.md §5).

Every backbone is built from a model name (a local folder or a hub name), a
device and a dtype, and records what made its features (:meth:`record`), so
that a trained model can make the same features again.
"""
import importlib
import pkgutil

from ...errors import TanError
from ...utils.registry import Registry
from .base import TextBackbone, VideoBackbone, weights_digest

VIDEO_BACKBONES = Registry("video backbone")
TEXT_BACKBONES = Registry("text backbone")
# What an unknown name's error adds; a tool passes its own (tan-extract-features: its --plugins).
PLUGIN_HINT = ("a plug-in's backbone is registered once its plug-in is imported (tan-extract-features --plugins, "
               "a config's PLUGINS)")


def register_video_backbone(name):
    """Class decorator: register a :class:`VideoBackbone` under ``name``."""
    return _registering(VIDEO_BACKBONES, VideoBackbone, name)


def register_text_backbone(name):
    """Class decorator: register a :class:`TextBackbone` under ``name``."""
    return _registering(TEXT_BACKBONES, TextBackbone, name)


def _registering(registry, contract, name):
    def deco(cls):
        # the built-in ones first, whichever is imported first: a plug-in's name that is taken is then
        # refused, rather than taking the place of a built-in one that is registered after it
        _load_builtins()
        _check_registered_class(registry, contract, name, cls)
        cls.NAME = name
        return registry.register(name)(cls)
    return deco


def _check_registered_class(registry, contract, name, cls):
    what = f"{registry.name} {name!r} ({getattr(cls, '__module__', '?')}.{getattr(cls, '__qualname__', cls)})"
    if not isinstance(name, str) or not name:
        raise TanError(f"{registry.name} name {name!r}: expected a non-empty string")
    if not (isinstance(cls, type) and issubclass(cls, contract)):
        raise TanError(f"{what} is not a subclass of {contract.__module__}.{contract.__name__}, the contract every "
                       f"{registry.name} follows (docs/video.md §5)")
    if cls.encode is contract.encode:
        raise TanError(f"{what} does not implement encode, which the contract requires (docs/video.md §5)")
    if name in registry:
        taken = registry.get(name)
        raise TanError(f"{what}: the name is taken by {taken.__module__}.{taken.__qualname__}; register the "
                       f"plug-in's backbone under a name of its own")


def video_backbone(name, hint=PLUGIN_HINT):
    """The class of video backbone ``name``; an unknown name's error lists the registered ones and ends
    with ``hint`` (how a plug-in's backbone is made known)."""
    return _registered(VIDEO_BACKBONES, name, hint)


def text_backbone(name, hint=PLUGIN_HINT):
    """The class of text backbone ``name`` (see :func:`video_backbone`)."""
    return _registered(TEXT_BACKBONES, name, hint)


def _registered(registry, name, hint):
    _load_builtins()
    if name not in registry:
        raise TanError(f"unknown {registry.name} {name!r}; registered: {', '.join(registry.names())}; {hint}")
    return registry.get(name)


def tiny_writer(name, hint=PLUGIN_HINT):
    """``write_tiny(folder, seed)`` of backbone ``name``: the video backbone's, else the text one's
    (a model such as CLIP serves both and writes the same folder)."""
    _load_builtins()
    if name not in VIDEO_BACKBONES and name not in TEXT_BACKBONES:
        raise TanError(f"unknown backbone {name!r}; registered: {', '.join(backbone_names())}; {hint}")
    registry = VIDEO_BACKBONES if name in VIDEO_BACKBONES else TEXT_BACKBONES
    return registry.get(name).write_tiny


def backbone_names():
    _load_builtins()
    return sorted(set(VIDEO_BACKBONES.names()) | set(TEXT_BACKBONES.names()))


_builtins_loaded = False


def _load_builtins():
    """Import every module of this package but ``base``: each registers its backbones, so that adding a
    built-in one touches only its own module. Once; the flag is set first, because the modules'
    registrations call this again while they are imported."""
    global _builtins_loaded
    if _builtins_loaded:
        return
    _builtins_loaded = True
    try:
        for module in pkgutil.iter_modules(__path__):
            if module.name != "base":
                importlib.import_module(f"{__name__}.{module.name}")
    except BaseException:
        _builtins_loaded = False  # a failed import is tried again (and fails again, saying why) next time
        raise


__all__ = ["PLUGIN_HINT", "TextBackbone", "VideoBackbone", "register_text_backbone", "register_video_backbone",
           "text_backbone", "video_backbone", "tiny_writer", "backbone_names", "weights_digest"]
