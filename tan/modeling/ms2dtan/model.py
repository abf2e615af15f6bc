"""The MS-2D-TAN meta-architecture: clip pool -> multi-scale maps -> fusion with
the sentence -> map convolutions -> one head per scale (docs/ms2dtan.md).

Parameter names are the reference's (clip_module, prop_module, fusion_module,
map_modules, pred_modules), so its released checkpoints load as they are."""
from typing import NamedTuple

import torch
from torch import nn
from torch.nn import functional as F

from ...config.models import TextInputChoice, register_model
from ..map2d import whitespace_words  # noqa: F401  (registers the "whitespace_words" text input of TOKENS)
from ..meta_arch import GroundingModel
from .clips import MiddleRowClips, WindowClips
from .config import add_ms_tan_config, anchor_counts, validate_ms_tan_config
from .foreign import from_experiment_file
from .fusion import SentenceMapFusion
from .layout import (duration_seconds, iou_targets, joined_candidates, joined_map, joined_picture, rescaled,
                     window_seconds)
from .map_convs import MAP_CONVS, ProposalHead
from .proposals import ClipPool, MultiScaleProposals


class EncodedVideos(NamedTuple):
    """The sentence-independent half: per scale the maps [V, H, N_s, A_s] and valid cells [V, 1, N_s, A_s]."""
    maps: list
    masks: list


class MultiScaleOutput(NamedTuple):
    """Per scale the logits [S, N_s, A_s] (0 outside valid cells) and the valid cells [S, N_s, A_s]."""
    logits: list
    masks: list


@register_model("MS_TAN")
class MultiScaleTAN(GroundingModel):
    """Trained on single queries with Adam; sentences as word vectors; clips at their own
    rate in sliding windows (or sampled); candidates on a start x duration map."""
    INPUT_SIZE_KEY = "CLIP_MODULE.INPUT_SIZE"

    add_config = staticmethod(add_ms_tan_config)
    validate_config = staticmethod(validate_ms_tan_config)
    from_foreign_config = staticmethod(from_experiment_file)

    @classmethod
    def text_input(cls, cfg):
        """Word vectors of tan's tokens, or of the words split at white space (TOKENS)."""
        return TextInputChoice("whitespace_words" if cfg.MODEL.MS_TAN.TOKENS == "whitespace" else "word_vectors")

    @classmethod
    def clip_input(cls, cfg):
        ms = cfg.MODEL.MS_TAN
        if ms.SLIDING_WINDOW:
            return WindowClips(ms.NUM_CLIPS, ms.NORMALIZE, ms.TIME_UNIT, "MODEL.MS_TAN.TIME_UNIT")
        return MiddleRowClips(ms.NUM_CLIPS, ms.NORMALIZE, longest_first=True)

    def __init__(self, cfg):
        super().__init__()
        ms = cfg.MODEL.MS_TAN
        clip, prop, fusion, maps = ms.CLIP_MODULE, ms.PROP_MODULE, ms.FUSION_MODULE, ms.MAP_MODULE
        self.sliding_window, self.num_clips = ms.SLIDING_WINDOW, ms.NUM_CLIPS
        self.time_unit, self.loss_settings = ms.TIME_UNIT, (ms.LOSS.MIN_IOU, ms.LOSS.MAX_IOU, ms.LOSS.BIAS)
        self.stride = clip.STRIDE  # rows per clip: cells of scale 0 are this many rows
        self.anchors = anchor_counts(prop.NUM_LAYERS)
        self.clip_module = ClipPool(clip.INPUT_SIZE, clip.HIDDEN_SIZE, clip.KERNEL_SIZE, clip.STRIDE)
        self.prop_module = MultiScaleProposals(prop.NAME, clip.HIDDEN_SIZE, prop.NUM_LAYERS)
        self.fusion_module = SentenceMapFusion(cfg.INPUT.PRE_QUERY_SIZE, fusion.TXT_HIDDEN_SIZE, fusion.TXT_NUM_LAYERS,
                                               fusion.TXT_BIDIRECTIONAL, clip.HIDDEN_SIZE)
        self.map_modules = nn.ModuleList(MAP_CONVS[maps.NAME](clip.HIDDEN_SIZE, maps.HIDDEN_SIZES, maps.KERNEL_SIZES,
                                                              maps.PADDINGS) for _ in prop.NUM_LAYERS)
        self.pred_modules = nn.ModuleList(ProposalHead(maps.HIDDEN_SIZES[-1]) for _ in prop.NUM_LAYERS)

    @property
    def mask2d(self):
        # not AttributeError: nn.Module would replace the message with its own
        raise NotImplementedError("MS_TAN has no fixed N x N map: its maps follow each batch's videos "
                                  "(candidates(), score_map())")

    def encode_video(self, feats, clip_counts=None):
        """feats [V, T, D_in] (rows past ``clip_counts`` [V] are padding) -> EncodedVideos."""
        v, t, _ = feats.shape
        rows = torch.arange(t, device=feats.device)[None, :]
        counts = clip_counts.to(feats.device) if clip_counts is not None else torch.full((v,), t, device=feats.device)
        real = rows < counts[:, None]
        clips, real = self.clip_module(feats.transpose(1, 2), real[:, None, :].to(feats.dtype))
        return EncodedVideos(*self.prop_module(clips, real))

    def ground(self, video, queries, wordlens, video_index=None):
        sentence = self.fusion_module.encode_sentence(queries, wordlens)  # once, for every scale
        logits, masks = [], []
        for cells, valid, map_conv, head in zip(video.maps, video.masks, self.map_modules, self.pred_modules):
            if video_index is not None:
                cells, valid = cells[video_index], valid[video_index]
            fused = self.fusion_module(sentence, cells, valid)
            logits.append(head(map_conv(fused), valid))
            masks.append(valid[:, 0])
        return MultiScaleOutput(logits, masks)

    def scores(self, output):
        """Per scale the probabilities [S, N_s, A_s] (float32 at least), 0 outside valid cells."""
        dtype = torch.promote_types(output.logits[0].dtype, torch.float32)
        return [torch.sigmoid(z.to(dtype)) * m.to(dtype) for z, m in zip(output.logits, output.masks)]

    def _joined(self, output):
        return joined_map([s.float() for s in self.scores(output)]), joined_map([m.float() for m in output.masks]) > 0

    def _seconds(self, n, durations):
        if self.sliding_window:  # a cell of scale 0 is STRIDE rows of TIME_UNIT seconds
            return window_seconds(n, self.time_unit * self.stride, durations.device)
        return duration_seconds(n, durations)

    def candidates(self, output, durations):
        scores, valid = self._joined(output)
        return joined_candidates(scores, valid.any(dim=0), self._seconds(scores.shape[-1], durations))

    def score_map(self, output, durations):
        scores, valid = self._joined(output)
        return joined_picture(scores, valid, self._seconds(scores.shape[-1], durations))

    def losses(self, output, batch):
        """The rescaled BCE of every scale, summed (docs/ms2dtan.md §7)."""
        moments, durations = batch["moments"].double(), batch["durations"]
        if self.sliding_window:  # moments from the window's start; the map spans the window's whole cells
            moments = moments - (batch["clip_offsets"].to(moments) * self.time_unit)[:, None]
            counts = batch["clip_counts"]
        else:
            counts = torch.full_like(batch["indices"], self.num_clips)
        total = 0.0
        for scale, (logits, valid) in enumerate(zip(output.logits, output.masks)):
            rate = self.stride * 2 ** scale  # feature rows per cell
            rows = (counts // rate).clamp(min=1)
            # the reference's float64 product (unit * rate) * rows, rounded to float32 where it is used
            span = self.time_unit * rate * rows.double() if self.sliding_window else durations.double()
            if not self.sliding_window:
                rows = torch.full_like(rows, logits.shape[1])
            iou = iou_targets(moments, span, rows, self.anchors[scale], logits.shape[1])
            target = rescaled(iou.to(logits.dtype), *self.loss_settings)
            weight = valid.to(logits.dtype)
            cells = F.binary_cross_entropy_with_logits(logits, target, reduction="none") * weight
            total = total + cells.sum() / weight.sum()
        return {"loss": total}
