"""The registry of models: MODEL.ARCHITECTURE names an entry (tan/config/models.py)."""
from ..config.models import MODELS, register_model

META_ARCH_REGISTRY = MODELS

__all__ = ["META_ARCH_REGISTRY", "MODELS", "register_model"]
