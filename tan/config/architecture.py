"""The settings subtree that a run's model reads, for code that needs a model's
value without knowing the model.

Every model keeps its settings under MODEL.{ARCHITECTURE}. The one value the
core needs from it is the width of the clip features the model reads (data
checks and prediction compare the files with it); the model says which of its
keys that is (``INPUT_SIZE_KEY``), asked of the model or of the class the
run's declarations name.
"""
from .models import model_class
from .setup import value_at


def model_settings(cfg):
    """The MODEL.{ARCHITECTURE} node of ``cfg``."""
    if cfg.MODEL.ARCHITECTURE not in cfg.MODEL:  # no registered model made it: the error lists those that are
        model_class(cfg)
    return cfg.MODEL[cfg.MODEL.ARCHITECTURE]


def model_key(cfg, key):
    """The full name of ``key`` in the model's subtree, for messages: MODEL.{ARCHITECTURE}.{key}."""
    return f"MODEL.{cfg.MODEL.ARCHITECTURE}.{key}"


def feature_size(cfg, model):
    """(width of the clip features ``model`` reads, the full config key that sets it); ``model``: the
    run's model class (its declarations' ``model``) or the model itself."""
    relative = model.INPUT_SIZE_KEY
    return value_at(model_settings(cfg), relative), model_key(cfg, relative)
