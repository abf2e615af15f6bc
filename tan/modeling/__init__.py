"""Models. This package is the built-in plug-in (tan/config/plugins.py): it
registers 2D-TAN ("TAN", the default), MMN and MS-2D-TAN ("MS_TAN"), each in its own folder, beside
the 2D-map pieces they share (map2d/). A model of another package registers
itself the same way (docs/models.md)."""
from ..config.models import MODELS, model_class, register_model, set_default_model
from . import mmn, ms2dtan, tan2d, tan_msra  # noqa: F401  (register MMN, MS_TAN, TAN and TAN_MSRA)
from .meta_arch import GroundingModel

set_default_model("TAN")


def build_model(cfg):
    """The model named by MODEL.ARCHITECTURE, built from the config."""
    return model_class(cfg)(cfg)


__all__ = ["build_model", "GroundingModel", "MODELS", "register_model"]
