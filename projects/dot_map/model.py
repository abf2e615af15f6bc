"""DOT_MAP: pooled clips -> the sparse max-pooled 2D map -> a 1 x 1 conv per
cell; the sentence is the mean of its word vectors, projected; a cell's logit
is the scaled cosine between the two. Trained with the scaled-IoU loss of the
2D-map family (2D-TAN's).

Everything the core needs to know about the model is declared on the class
(docs/models.md §1); nothing in tan/ names it.
"""
import torch
from torch import nn
from torch.nn import functional as F

from tan.modeling import GroundingModel, HookBase, Recipe, register_model
from tan.modeling.map2d.feat2d import SparseMaxPool2D
from tan.modeling.map2d.featpool import FeatAvgPool
from tan.modeling.map2d.iou_loss import ScaledIoULoss

from .config import add_dot_map_config, validate_dot_map_config


class TemperatureWarmup(HookBase):
    """Before each epoch (a resumed one too): the temperature of that epoch."""

    def __init__(self, model, start, epochs):
        self.model, self.start, self.epochs = model, start, epochs

    def before_epoch(self, state, epoch):
        done = min(epoch - 1, self.epochs) / self.epochs if self.epochs else 1.0
        self.model.temperature = self.start + (1.0 - self.start) * done


@register_model("DOT_MAP")
class DotMap(GroundingModel):
    INPUT_SIZE_KEY = "INPUT_SIZE"  # MODEL.DOT_MAP.INPUT_SIZE is the clip-feature width
    RUNTIME_KEYS = ()  # every key of MODEL.DOT_MAP changes what is learned

    add_config = staticmethod(add_dot_map_config)
    validate_config = staticmethod(validate_dot_map_config)

    @classmethod
    def recipe(cls, cfg):
        node = cfg.MODEL.DOT_MAP
        return Recipe("adamw", weight_decay=node.WEIGHT_DECAY, clip_grad_norm=node.CLIP_GRAD_NORM)

    def __init__(self, cfg):
        super().__init__()
        node = cfg.MODEL.DOT_MAP
        stride = cfg.INPUT.NUM_PRE_CLIPS // node.NUM_CLIPS
        self.featpool = FeatAvgPool(node.INPUT_SIZE, node.HIDDEN_SIZE, node.KERNEL_SIZE, stride)
        self.feat2d = SparseMaxPool2D(node.NUM_CLIPS, node.POOLING_COUNTS)
        self.cell = nn.Conv2d(node.HIDDEN_SIZE, node.HIDDEN_SIZE, 1)
        self.sentence = nn.Linear(cfg.INPUT.PRE_QUERY_SIZE, node.HIDDEN_SIZE)
        self.scale = nn.Parameter(torch.tensor(10.0))
        self.loss = ScaledIoULoss(node.MIN_IOU, node.MAX_IOU, self.feat2d.mask2d)
        self.temperature = 1.0  # evaluation; training sets it per epoch (TemperatureWarmup)
        self.warmup = (node.TEMPERATURE, node.WARMUP_EPOCHS)

    def hooks(self, cfg):
        return [TemperatureWarmup(self, *self.warmup)]

    def encode_video(self, feats):
        """feats [V, P, D_in] -> cell embeddings [V, H, N, N], unit length."""
        return F.normalize(self.cell(self.feat2d(self.featpool(feats))), dim=1)

    def ground(self, cells, queries, wordlens, video_index=None):
        """queries [S, L, E] word vectors (padded after each sentence's wordlens) -> logits [S, N, N]."""
        if video_index is not None:
            cells = cells[video_index]
        real = (torch.arange(queries.shape[1], device=queries.device)[None] < wordlens.to(queries.device)[:, None])
        mean = (queries * real[..., None]).sum(1) / real.sum(1, keepdim=True).clamp(min=1)
        sentence = F.normalize(self.sentence(mean), dim=1)  # [S, H]
        return torch.einsum("sh,shij->sij", sentence, cells) * self.scale / self.temperature

    def scores(self, logits):
        return torch.sigmoid(logits.float()) * self.mask2d

    def losses(self, logits, batch):
        return {"loss": self.loss(logits, batch["gt_moments"], batch["durations"])}

    def adapt_state_dict(self, state):
        """Checkpoints of the model's first version named the sentence projection ``text_fc``."""
        return {("sentence." + k[len("text_fc."):] if k.startswith("text_fc.") else k): v for k, v in state.items()}
