"""The model contract: one class, :class:`GroundingModel`, that every model subclasses.

What a model must define is abstract here (``add_config``, ``encode_video``,
``ground``, ``scores``, ``losses``): a class that misses one is refused when it
is registered, naming what is missing. Everything else has a default that a
model overrides where it differs. Two kinds of member:

- what the engine calls on a built model, for a batch (training, evaluation,
  prediction, the API, the pictures);
- the declarations, class methods and attributes read from the class before a
  model exists (its settings and their checks, how its sentences and clips
  are read, how its batches are grouped, how it is trained, foreign files).

docs/models.md describes each member, §2-§4; tests/test_docs.py holds the page
to this class, so the two cannot drift apart.
"""
import inspect
from abc import ABCMeta, abstractmethod

from torch import nn

from ..config.models import Recipe, TextInputChoice
from ..data.features.clip_inputs import ResampledClips
from ..errors import TanError
from ..structures.candidates import map_candidates, map_picture
from .window_losses import cross_window_terms


class GroundingModel(nn.Module, metaclass=ABCMeta):
    NAME = ""  # set by register_model
    # Keys of its subtree that may change between the runs of a folder (they change no result).
    RUNTIME_KEYS = ()
    # The key of its subtree that gives the clip-feature width.
    INPUT_SIZE_KEY = "FEATPOOL.INPUT_SIZE"
    # Keys outside MODEL.{NAME} that it adds (a reference code's file layout); best left empty.
    KEYS_OUTSIDE = ()

    @classmethod
    @abstractmethod
    def add_config(cls, cfg):
        """Add MODEL.{NAME} with every key documented by a comment (docs/models.md §2)."""

    @classmethod
    def validate_config(cls, cfg):
        """Refuse settings that cannot work, with tan.config.models.need (one message naming the key)."""

    @classmethod
    def text_input(cls, cfg):
        """What its sentences are read as: precomputed sentence features with
        INPUT.SENTENCE_FEATURES, else word vectors (INPUT.WORD_VECTORS)."""
        return TextInputChoice("sentence_features" if cfg.INPUT.SENTENCE_FEATURES else "word_vectors")

    @classmethod
    def clip_input(cls, cfg):
        """How it takes a video's clips (tan.data.features.clip_inputs): L2-normalised rows
        averaged into INPUT.NUM_PRE_CLIPS clips."""
        return ResampledClips(cfg.INPUT.NUM_PRE_CLIPS)

    @classmethod
    def batches_by_video(cls, cfg):
        """True: a batch is SOLVER.BATCH_SIZE videos with their sentences; False: that many queries."""
        return False

    @classmethod
    def recipe(cls, cfg):
        """How it is trained (tan.config.models.Recipe): Adam, no clipping."""
        return Recipe()

    @classmethod
    def check_environment(cls, cfg):
        """Fail before any work when something it needs cannot be had (an optional package, a file)."""

    @classmethod
    def from_foreign_config(cls, data, path):
        """A reference code's experiment file (``data``, its parsed YAML, read from ``path``)
        as tan settings (tan.config.models.ForeignConfig), or None when it is not one
        of this model's (tan-convert-config asks every registered model)."""
        return None

    def hooks(self, cfg):
        """Extra hooks of its training loop (tan.utils.hooks.HookBase), called after the built-in ones."""
        return []

    @property
    def mask2d(self):
        return self.feat2d.mask2d

    def __init__(self):
        super().__init__()
        # The window stage, an optional part of every model (docs/long_videos.md), set by
        # set_window_stage from MODEL.RELEVANCE and MODEL.WINDOW_RANKING when it is built: the window
        # relevance head (tan.modeling.relevance; its weights are the model's, under "relevance.") and
        # the weights of the cross-window losses (tan.modeling.window_losses.CrossWindowLosses).
        self.register_module("relevance", None)
        self.window_losses = None

    def set_window_stage(self, relevance, window_losses):
        """Give the model its relevance head (a module, or None) and cross-window losses (or None). The
        head is registered after the model's own modules, so that its parameters come last (the
        optimizer's state and the gradient norm list a model's parameters in that order)."""
        self._modules.pop("relevance", None)
        self.register_module("relevance", relevance)
        self.window_losses = window_losses
        if window_losses is not None:
            _check_forward_takes_window_terms(type(self))
        return self

    @abstractmethod
    def encode_video(self, feats):
        """feats [V, P, D_in] -> what ``ground`` needs of the videos (computed once per video)."""

    @abstractmethod
    def ground(self, video, queries, wordlens, video_index=None):
        """The output for a batch of sentences; sentence s asks about video ``video_index[s]``."""

    @abstractmethod
    def scores(self, output):
        """[S, N, N] float32 scores, zero outside the valid cells (``mask2d``)."""

    @abstractmethod
    def losses(self, output, batch):
        """{name: float32 scalar}: the loss terms of a training batch, summed and minimised."""

    def forward(self, feats, queries, wordlens, video_index=None, ranked=None, window_terms=False, **lengths):
        """The output for a batch (``lengths``: a clip input of variable length's ``clip_counts``, to
        ``encode_video``). In training with cross-window losses (``window_terms``), (output, their terms
        {name: float32 scalar}) from the batch's ``ranked`` windows (tan.structures.ranked_windows.RankedWindows, or None
        when it brought none): computed in this one forward, so that DistributedDataParallel sees every
        use of every parameter, a frozen encoder's absence included."""
        output = self.ground(self.encode_video(feats, **lengths), queries, wordlens, video_index)
        if not window_terms:
            return output
        return output, cross_window_terms(self, ranked, queries, wordlens)

    def candidates(self, output, durations):
        """The moments the evaluation ranks: every valid cell of the start x end map of ``scores``."""
        return map_candidates(self.scores(output), durations, self.mask2d)

    def score_map(self, output, durations):
        """The map as pictures draw it (tan.structures.candidates.ScoreMap): start x end."""
        return map_picture(self.scores(output), durations, self.mask2d)

    def parameter_groups(self):
        return [{"params": [p for p in self.parameters() if p.requires_grad], "lr_scale": 1.0, "name": "all"}]

    def adapt_state_dict(self, state):
        return state

    @property
    def has_unused_parameters(self):
        """True when some parameters get no gradient in some steps (a frozen
        encoder): distributed training must then look for them each step."""
        return False


def _check_forward_takes_window_terms(cls):
    """A model with cross-window losses computes them in its forward: one that overrides ``forward``
    must take ``ranked`` and ``window_terms`` (or pass its keyword arguments on to the contract's)."""
    parameters = inspect.signature(cls.forward).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return
    missing = [name for name in ("ranked", "window_terms") if name not in parameters]
    if missing:
        raise TanError(f"model {cls.NAME or cls.__name__} ({cls.__module__}.{cls.__qualname__}) overrides forward "
                       f"without {' and '.join(missing)}: with MODEL.RELEVANCE or MODEL.WINDOW_RANKING its forward "
                       f"computes the cross-window losses; take them and call super().forward, or keep the "
                       f"contract's forward (docs/models.md §3)")
