"""The registry of models, and the small types a model's declarations return.

A model is a class registered here under the name that MODEL.ARCHITECTURE
gives. The contract it follows is one class, tan.modeling.GroundingModel:
what it must define is abstract there, everything else has a default, and
docs/models.md describes each member (a test holds the page to the class).
This module sits below the models so that the config can ask a model's class
for its declarations (settings, checks, text input) without importing them.
"""
from typing import Any, NamedTuple

from ..errors import TanError
from ..utils.registry import Registry

MODELS = Registry("model (MODEL.ARCHITECTURE)")


def register_model(name):
    """Class decorator: register a model under ``name`` (its MODEL.ARCHITECTURE and its ``MODEL.{name}`` subtree)."""
    if not (name.replace("_", "").isalnum() and name == name.upper() and name[0].isalpha()):
        raise ValueError(f"model name {name!r}: expected upper-case letters, digits and '_', as config keys are")

    def deco(cls):
        if getattr(cls, "__abstractmethods__", None) is None:
            raise TanError(f"model {name!r} ({cls.__module__}.{cls.__qualname__}) is not a subclass of "
                           f"tan.modeling.GroundingModel, the contract every model follows")
        missing = sorted(cls.__abstractmethods__)
        if missing:
            raise TanError(f"model {name!r} ({cls.__module__}.{cls.__qualname__}) does not define "
                           f"{', '.join(missing)}, which the contract requires (docs/models.md)")
        cls.NAME = name
        return MODELS.register(name)(cls)

    return deco


_DEFAULT = []  # the model a config without MODEL.ARCHITECTURE gets (set by the built-in plug-in)


def set_default_model(name):
    """The model of a config that names none (the reference codes' habit: their files may omit it)."""
    _DEFAULT[:] = [name]


def default_model():
    return _DEFAULT[0] if _DEFAULT else ""


def model_class(cfg):
    """The registered class of MODEL.ARCHITECTURE; an error listing the registered ones."""
    name = cfg.MODEL.ARCHITECTURE
    if name not in MODELS:
        raise TanError(f"config key MODEL.ARCHITECTURE: no model {name!r} is registered; registered: "
                       f"{', '.join(MODELS.names())} (a model of a plug-in needs its module in PLUGINS)")
    return MODELS.get(name)


class Declarations(NamedTuple):
    """What a run's model declares about its data and its training, asked of its class once per
    run (:func:`declarations`) and handed to the data layer, the checks, the trainer and the
    test: ``model`` (the class), ``text_input`` (a TextInputChoice), ``clip_input`` (how it takes
    a video's clips), ``batches_by_video`` (bool) and ``recipe`` (a Recipe)."""
    model: type
    text_input: Any
    clip_input: Any
    batches_by_video: bool
    recipe: Any


def declarations(cfg):
    """The :class:`Declarations` of the model of ``cfg``."""
    cls = model_class(cfg)
    return Declarations(cls, cls.text_input(cfg), cls.clip_input(cfg), cls.batches_by_video(cfg), cls.recipe(cfg))


def need(cond, key, msg):
    """Stop with ``config key KEY: MSG`` unless ``cond``."""
    if not cond:
        raise TanError(f"config key {key}: {msg}")


class TextInputChoice(NamedTuple):
    """How a model's sentences enter it: the name of a registered text input
    ("word_vectors", "word_pieces", "sentence_features", or a plug-in's), and
    the options it is built with (for word pieces: the tokenizer's ``pretrained``
    name and the config ``key`` that gives it)."""
    name: str
    options: Any = None

    def option(self, key, default=None):
        return (self.options or {}).get(key, default)


class Recipe(NamedTuple):
    """How a model is trained: ``optimizer``, the name of one of tan.solver.OPTIMIZERS taken
    when SOLVER.OPTIMIZER is "", with ``betas`` (Adam's and AdamW's) and ``weight_decay``
    (None: torch's defaults), and the gradient norm clipped at ``clip_grad_norm`` (0: not clipped)."""
    optimizer: str = "adam"
    betas: Any = None
    weight_decay: Any = None
    clip_grad_norm: float = 0.0


class ForeignConfig(NamedTuple):
    """A reference code's experiment file as tan settings (a model's ``from_foreign_config``):
    ``config``, nested dicts of config keys (the model's own included); ``catalog``,
    dataset entries for a DATASETS.CATALOG file, or None; ``notes``, what the
    conversion could not carry over or chose, each a line for the written file."""
    config: dict
    catalog: Any = None
    notes: tuple = ()

