"""What every meta-architecture offers the engine (training, evaluation,
prediction, the API), so that none of them needs to know which model it runs.

- ``forward(feats, queries, wordlens, video_index=None)``: the model's output
  for a batch; ``feats`` [V, P, D_in] holds V videos and ``video_index`` [S]
  names each sentence's video (None: sentence s asks about video s, or all
  ask about the only one).
- ``encode_video(feats)`` and ``ground(video, queries, wordlens, video_index)``:
  the two halves of ``forward``; a video is encoded once however many
  sentences ask about it.
- ``scores(output)``: [S, N, N] float32 scores, zero outside the valid cells.
- ``losses(output, batch)``: the named loss terms of a training batch, float32
  scalars whose sum is minimised.
- ``set_epoch(epoch)``: called before each training epoch (counted from 1),
  for models whose training changes with the epoch.
- ``parameter_groups()``: the optimizer's groups, each with an ``lr_scale``.

Class attributes tell the engine how to feed and train the model:
``BATCHES_BY_VIDEO`` (a batch is videos with their sentences, not queries),
``OPTIMIZER`` ("adam" or "adamw"), ``CLIP_GRAD_NORM`` (0: none).
"""
from torch import nn


class GroundingModel(nn.Module):
    BATCHES_BY_VIDEO = False
    OPTIMIZER = "adam"
    CLIP_GRAD_NORM = 0.0

    @property
    def mask2d(self):
        return self.feat2d.mask2d

    def forward(self, feats, queries, wordlens, video_index=None):
        return self.ground(self.encode_video(feats), queries, wordlens, video_index)

    def set_epoch(self, epoch):
        pass

    def parameter_groups(self):
        return [{"params": [p for p in self.parameters() if p.requires_grad], "lr_scale": 1.0, "name": "all"}]

    @property
    def has_unused_parameters(self):
        """True when some parameters get no gradient in some steps (a frozen
        encoder): distributed training must then look for them each step."""
        return False
