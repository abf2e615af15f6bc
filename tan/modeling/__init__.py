"""Models. This package is the built-in plug-in (tan/config/plugins.py): it
registers 2D-TAN ("TAN", the default), MMN, MS-2D-TAN ("MS_TAN") and microsoft's 2D-TAN
("TAN_MSRA"), each in its own folder, beside the 2D-map pieces they share (map2d/).
A model of another package registers itself the same way, with what it imports from
here: the contract, the decorator and the types its declarations return (docs/models.md)."""
from ..config.models import (MODELS, ForeignConfig, Recipe, TextInputChoice, model_class, need, register_model,
                             set_default_model)
from ..config.architecture import feature_size
from ..utils.hooks import HookBase
from .meta_arch import GroundingModel
from .relevance import relevance_head
from .window_losses import CrossWindowLosses
from . import mmn, ms2dtan, tan2d, tan_msra  # noqa: F401  (register MMN, MS_TAN, TAN and TAN_MSRA)

set_default_model("TAN")


def build_model(cfg, cls=None):
    """The model named by MODEL.ARCHITECTURE (or of class ``cls``), built from the config, with its
    window stage: the relevance head (tan/modeling/relevance.py) when MODEL.RELEVANCE.ENABLED, the
    cross-window losses (tan/modeling/window_losses.py) when MODEL.RELEVANCE or MODEL.WINDOW_RANKING
    weighs them."""
    cls = cls or model_class(cfg)
    return cls(cfg).set_window_stage(relevance_head(cfg, cls, feature_size(cfg, cls)[0]),
                                     CrossWindowLosses.from_config(cfg))


__all__ = ["ForeignConfig", "GroundingModel", "HookBase", "MODELS", "Recipe", "TextInputChoice", "build_model",
           "need", "register_model"]
