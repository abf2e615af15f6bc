"""MMN, the mutual matching network (docs/mmn.md): featpool -> feat2d ->
joint proposal conv (two embeddings per cell) and a text encoder (two
embeddings per sentence), compared by cosine similarity.

Training batches hold videos with their sentences (``batches_by_video``), so
that every sentence has negatives in its own video and in the others.
"""
from typing import NamedTuple

import torch
from torch.nn import functional as F

from ...config.models import Recipe, TextInputChoice, register_model
from ...utils.hooks import HookBase
from ..map2d.config import MAP_RUNTIME_KEYS
from ..map2d.feat2d import build_feat2d
from ..map2d.featpool import build_featpool
from ..map2d.reference_files import MMN as MMN_FILES
from ..meta_arch import GroundingModel
from . import config
from .joint_conv import JointProposalConv
from .loss import IOU_SCORE_SCALE, MutualMatchingLoss
from .text_encoder import BertTextEncoder, build_text_encoder, check_text_encoder

# MMN's AdamW settings (its train_net.py), and its trainer's gradient-norm clipping.
ADAMW_BETAS, ADAMW_WEIGHT_DECAY, CLIP_GRAD_NORM = (0.9, 0.99), 1e-5, 5.0


class CellEmbeddings(NamedTuple):
    """A video batch's valid cells in the joint space, L2-normalised: [V, J, C] each."""
    match: torch.Tensor
    iou: torch.Tensor


class MMNOutput(NamedTuple):
    cells: CellEmbeddings
    match: torch.Tensor  # [S, J] sentence embeddings, L2-normalised
    iou: torch.Tensor  # [S, J]
    video_index: torch.Tensor  # [S] or None (see GroundingModel)


def normalized(x):
    """L2-normalised along dim 1, in float32 at least (embeddings of a bf16/fp16 autocast too)."""
    return F.normalize(x.to(torch.promote_types(x.dtype, torch.float32)), dim=1)


def all_pairs(sentences, cells):
    """sentences [S, J], cells [V, J, C] -> [S, V, C]: every sentence with every cell of every video."""
    v, j, c = cells.shape
    return (sentences @ cells.transpose(0, 1).reshape(j, v * c)).view(-1, v, c)


def own_video(sentences, cells, video_index):
    """[S, C]: each sentence with the cells of its own video only."""
    if video_index is None:  # video s, or the only video for all
        return torch.matmul(sentences[:, None, :], cells).squeeze(1)
    parts = []
    counts = torch.bincount(video_index, minlength=cells.shape[0]).tolist()  # sentences are grouped by video
    for video, part in enumerate(torch.split(sentences, counts)):
        if len(part):
            parts.append(part @ cells[video])
    return torch.cat(parts)


class EpochSchedule(HookBase):
    """Tells the model the epoch before each: its frozen DistilBERT and late loss weights follow it."""

    def __init__(self, model):
        self.model = model

    def before_epoch(self, state, epoch):
        self.model.set_epoch(epoch)


@register_model("MMN")
class MMN(GroundingModel):
    RUNTIME_KEYS = MAP_RUNTIME_KEYS
    KEYS_OUTSIDE = config.KEYS_OUTSIDE
    add_config = staticmethod(config.add_mmn_config)
    validate_config = staticmethod(config.validate_mmn_config)
    from_foreign_config = staticmethod(MMN_FILES.convert)  # MCG-NJU/MMN's files, for tan-convert-config
    check_environment = staticmethod(check_text_encoder)

    @classmethod
    def text_input(cls, cfg):
        """DistilBERT's word pieces (its tokenizer), or for the LSTM encoder the contract's default."""
        encoder = cfg.MODEL.MMN.TEXT_ENCODER
        if encoder.NAME == "BERT":
            return TextInputChoice("word_pieces", {"pretrained": encoder.BERT.PRETRAINED,
                                                   "key": "MODEL.MMN.TEXT_ENCODER.BERT.PRETRAINED"})
        return super().text_input(cfg)

    @classmethod
    def batches_by_video(cls, cfg):
        """Videos with their sentences, so that every sentence has negatives in its own video and in the others."""
        return True

    @classmethod
    def recipe(cls, cfg):
        return Recipe("adamw", betas=ADAMW_BETAS, weight_decay=ADAMW_WEIGHT_DECAY, clip_grad_norm=CLIP_GRAD_NORM)

    def hooks(self, cfg):
        return [EpochSchedule(self)]

    def __init__(self, cfg):
        super().__init__()
        mmn = cfg.MODEL.MMN
        self.featpool = build_featpool(cfg)
        self.feat2d = build_feat2d(cfg)
        mask2d = self.feat2d.mask2d
        self.proposal_conv = JointProposalConv(mmn.FEATPOOL.HIDDEN_SIZE, mmn.PREDICTOR.HIDDEN_SIZE,
                                               mmn.PREDICTOR.KERNEL_SIZE, mmn.PREDICTOR.NUM_STACK_LAYERS,
                                               mmn.JOINT_SPACE_SIZE, mask2d, mmn.PREDICTOR.STRIP_ROWS,
                                               mmn.PREDICTOR.RECOMPUTE)
        self.text_encoder = build_text_encoder(cfg)
        self.criterion = MutualMatchingLoss(cfg, mask2d)
        self.num_clips = mmn.NUM_CLIPS
        self.score_pow = cfg.TEST.CONTRASTIVE_SCORE_POW
        self.freeze_bert = cfg.SOLVER.FREEZE_BERT
        self.bert_lr_scale = mmn.TEXT_ENCODER.BERT.LR_SCALE
        self.epoch = 1

    @property
    def uses_bert(self):
        return isinstance(self.text_encoder, BertTextEncoder)

    def encode_video(self, feats):
        """feats [V, P, D_in] -> the normalised cell embeddings of each video."""
        match, iou = self.proposal_conv(self.feat2d(self.featpool(feats)))
        return CellEmbeddings(normalized(match), normalized(iou))

    def ground(self, cells, queries, wordlens, video_index=None):
        match, iou = self.text_encoder(queries, wordlens)
        return MMNOutput(cells, normalized(match), normalized(iou), video_index)

    def _valid_to_map(self, values):
        """[S, C] values of the valid cells -> [S, N, N], zero elsewhere."""
        n = self.num_clips
        out = values.new_zeros(values.shape[0], n * n)
        out[:, self.proposal_conv.cells] = values
        return out.view(-1, n, n)

    def scores(self, output):
        """((c + 1) / 2) ** CONTRASTIVE_SCORE_POW * sigmoid(10 * c_iou) per valid cell (docs/mmn.md §5)."""
        match = own_video(output.match, output.cells.match, output.video_index)
        iou = torch.sigmoid(IOU_SCORE_SCALE * own_video(output.iou, output.cells.iou, output.video_index))
        return self._valid_to_map((match * 0.5 + 0.5).clamp(min=0).pow(self.score_pow) * iou)

    def losses(self, output, batch):
        video_index = output.video_index
        if video_index is None:
            video_index = torch.arange(output.match.shape[0], device=output.match.device)
        match = all_pairs(output.match, output.cells.match)  # [S, V, C]
        rows = torch.arange(len(video_index), device=video_index.device)
        # Own-video cosines of the IoU branch, picked from all pairs: V times the products
        # needed, but one matrix product and no read-back of how many sentences each video has.
        iou_logits = IOU_SCORE_SCALE * all_pairs(output.iou, output.cells.iou)[rows, video_index]
        # IoUs in float32, as MMN computes them (and as TAN's targets are)
        ious = self.criterion.cell_ious(batch["gt_moments"], batch["durations"], self.num_clips).to(match.dtype)
        return self.criterion(match, iou_logits, ious, batch["gt_moments"].to(match.dtype), video_index, self.epoch)

    def set_epoch(self, epoch):
        """Epochs 1..SOLVER.FREEZE_BERT keep DistilBERT frozen; after SOLVER.ONLY_IOU the
        contrastive terms shrink (both as MMN's trainer does)."""
        self.epoch = epoch
        if self.uses_bert:
            self.text_encoder.frozen = epoch <= self.freeze_bert

    def parameter_groups(self):
        """DistilBERT learns at BERT.LR_SCALE x SOLVER.LR (MMN: 0.1), the rest at SOLVER.LR."""
        bert = [p for n, p in self.named_parameters() if n.startswith("text_encoder.bert.")]
        ids = {id(p) for p in bert}
        groups = [{"params": [p for p in self.parameters() if id(p) not in ids], "lr_scale": 1.0, "name": "base"}]
        if bert:
            groups.append({"params": bert, "lr_scale": self.bert_lr_scale, "name": "bert"})
        return groups

    @property
    def has_unused_parameters(self):
        return self.uses_bert and self.freeze_bert > 0
