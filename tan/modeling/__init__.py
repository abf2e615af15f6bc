from . import mmn, tan  # noqa: F401  (register MMN and TAN)
from .registry import META_ARCH_REGISTRY


def build_model(cfg):
    """The model named by MODEL.ARCHITECTURE, built from the config."""
    return META_ARCH_REGISTRY.get(cfg.MODEL.ARCHITECTURE)(cfg)


__all__ = ["build_model", "META_ARCH_REGISTRY"]
