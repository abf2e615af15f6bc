"""The model contract (docs/models.md): what every model offers the engine
(training, evaluation, prediction, the API) and what it declares to the core,
so that none of them needs to know which model it runs.

The module's part, for a batch:

- ``forward(feats, queries, wordlens, video_index=None)``: the model's output
  for a batch; ``feats`` [V, P, D_in] holds V videos and ``video_index`` [S]
  names each sentence's video (None: sentence s asks about video s, or all
  ask about the only one). A model whose clip input has a variable length
  also gets ``clip_counts`` [V], each video's real rows.
- ``encode_video(feats)`` and ``ground(video, queries, wordlens, video_index)``:
  the two halves of ``forward``; a video is encoded once however many
  sentences ask about it.
- ``scores(output)``: [S, N, N] float32 scores, zero outside the valid cells
  (``mask2d``, [N, N] bool).
- ``candidates(output, durations)``: the candidate moments the evaluation
  ranks (tan.structures.candidates.Candidates), and ``score_map(output,
  durations)`` the map as pictures draw it; both default to a start x end map.
- ``losses(output, batch)``: the named loss terms of a training batch, float32
  scalars whose sum is minimised.
- ``parameter_groups()``: the optimizer's groups, each with an ``lr_scale``.
- ``adapt_state_dict(state)``: a checkpoint's weights as this model names
  them (a foreign checkpoint's names mapped onto its own).

The declarations, read from the class before a model exists (see
tan/config/models.py): ``add_config``, ``validate_config``, ``RUNTIME_KEYS``,
``INPUT_SIZE_KEY``, ``KEYS_OUTSIDE``, ``text_input``, ``clip_input``,
``batches_by_video``, ``recipe``, ``hooks``, ``check_environment``,
``from_foreign_config``.
"""
from torch import nn

from ..config.models import Recipe, TextInputChoice
from ..data.features.clip_inputs import ResampledClips
from ..structures.candidates import map_candidates, map_picture


class GroundingModel(nn.Module):
    NAME = ""  # set by register_model
    # Keys of its subtree that may change between the runs of a folder (they change no result).
    RUNTIME_KEYS = ()
    # The key of its subtree that gives the clip-feature width.
    INPUT_SIZE_KEY = "FEATPOOL.INPUT_SIZE"
    # Keys outside MODEL.{NAME} that it adds (a reference code's file layout); best left empty.
    KEYS_OUTSIDE = ()

    @classmethod
    def add_config(cls, cfg):
        """Add MODEL.{NAME} with every key documented by a comment (docs/models.md §2)."""
        raise NotImplementedError(f"model {cls.NAME!r} must define add_config(cfg)")

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

    def forward(self, feats, queries, wordlens, video_index=None):
        return self.ground(self.encode_video(feats), queries, wordlens, video_index)

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
