"""MMN's training objective (docs/mmn.md §4): the mutual-matching contrastive
loss on the matching embeddings and the scaled-IoU BCE on the IoU branch.

MMN's code loops over the videos of a batch; here every term is one batched
computation over all S sentences and the C valid cells of all V videos,
from the similarity of each sentence with every cell of every video.
"""
import math

import torch
from torch import nn
from torch.nn import functional as F

from ...structures.moments import best_moment_iou, cell_seconds, cell_spans, temporal_iou
from ..map2d.ordered_sums import take_rows

# MMN's IoU score is sigmoid(10 * cosine): the cosine's range [-1, 1] spread over the sigmoid.
IOU_SCORE_SCALE = 10.0
# MMN's weight of the contrastive terms after SOLVER.ONLY_IOU epochs, relative to CONTRASTIVE_WEIGHT.
LATE_CONTRASTIVE_SCALE = 0.01
# Added inside the log of the sentence-to-video term, as MMN does.
SENTENCE_LOG_EPS = 1e-6


class MutualMatchingLoss(nn.Module):
    def __init__(self, cfg, mask2d):
        super().__init__()
        loss = cfg.MODEL.MMN.LOSS
        self.min_iou, self.max_iou, self.bce_weight = loss.MIN_IOU, loss.MAX_IOU, loss.BCE_WEIGHT
        self.num_positives = loss.NUM_POSTIVE_VIDEO_PROPOSAL
        self.negative_iou, self.sentence_removal_iou = loss.NEGATIVE_VIDEO_IOU, loss.SENT_REMOVAL_IOU
        self.tau_video, self.tau_sentence, self.margin = loss.TAU_VIDEO, loss.TAU_SENT, loss.MARGIN
        self.contrastive_weight = loss.CONTRASTIVE_WEIGHT
        self.only_iou_after = cfg.SOLVER.ONLY_IOU
        i, j = mask2d.nonzero(as_tuple=True)
        self.register_buffer("cell_bounds", cell_spans(i, j), persistent=False)  # [C, 2] clip units

    def cell_ious(self, gt_moments, durations, num_clips):
        """[S, C]: IoU of every valid cell's moment (seconds) with the best of each sentence's ground-truth moments [S, W, 2]."""
        # float32 (grid x duration) / N: MMN's arithmetic, which is the reference evaluation's too
        return best_moment_iou(cell_seconds(self.cell_bounds, durations, num_clips), gt_moments.float()[:, None, :, :])

    def forward(self, match, iou_logits, ious, gt_moments, video_index, epoch):
        """match [S, V, C]: cosine of sentence s with every cell of every video
        (matching branch); iou_logits [S, C]: 10 x the IoU-branch cosine with the
        sentence's own video; ious [S, C]; gt_moments [S, W, 2]; video_index [S]."""
        loss_iou = self.bce_weight * F.binary_cross_entropy_with_logits(
            iou_logits, ((ious - self.min_iou) / (self.max_iou - self.min_iou)).clamp(0, 1))
        loss_vid, loss_sent = self.contrastive(match, ious, gt_moments, video_index)
        weight = self.contrastive_weight * (1.0 if epoch <= self.only_iou_after else LATE_CONTRASTIVE_SCALE)
        return {"loss_iou": loss_iou, "loss_vid": weight * loss_vid, "loss_sent": weight * loss_sent}

    def contrastive(self, match, ious, gt_moments, video_index):
        s = match.shape[0]
        rows = torch.arange(s, device=match.device)
        own = match[rows, video_index]  # [S, C]
        positives = ious.topk(self.num_positives, dim=1).indices  # [S, k]
        positive = own.gather(1, positives)  # [S, k]

        # Video to sentence: each positive cell against every sentence of the batch.
        # Sentences of the same video whose moments overlap enough are left out.
        # [S, k, S']: match.permute(1, 2, 0)[video_index[:, None], positives], taken as rows of match
        # seen as [V * C, S'] so that the gradient sums the terms of a cell shared by sentences in a
        # fixed order (docs/training.md, "Repeatability on a CPU")
        cells = (video_index[:, None] * match.shape[2] + positives).flatten()
        cell_vs_sentences = take_rows(match.permute(1, 2, 0).flatten(0, 1), cells).view(s, -1, s)
        same_video = video_index[:, None] == video_index[None, :]
        # (with several gt_moments: the best IoU between any window of one and any of the other)
        pair_iou = temporal_iou(gt_moments[:, None, :, None, :], gt_moments[None, :, None, :, :]).amax(dim=(-2, -1))
        overlap = pair_iou >= self.sentence_removal_iou
        keep = ~(same_video & overlap) | torch.eye(s, dtype=torch.bool, device=match.device)
        margin = self.margin * torch.eye(s, dtype=match.dtype, device=match.device)
        logits = (cell_vs_sentences - margin[:, None, :]) / self.tau_video
        logits = logits.masked_fill(~keep[:, None, :], -math.inf)
        loss_vid = -((positive - self.margin) / self.tau_video - logits.logsumexp(dim=2)).mean()

        # Sentence to video: each sentence against its positive, the cells of its
        # own video (those with IoU at or above NEGATIVE_VIDEO_IOU count with
        # similarity 0, as MMN multiplies them by 0 rather than removing them),
        # and every cell of the other videos.
        own_negatives = own * (ious < self.negative_iou).to(own.dtype)
        other_video = (video_index[:, None] != torch.arange(match.shape[1], device=match.device)[None])  # [S, V]
        others = match.masked_fill(~other_video[:, :, None], -math.inf).flatten(1)  # [S, V * C]
        rest = torch.cat([own_negatives, others], dim=1).div(self.tau_sentence).logsumexp(dim=1)  # [S]
        positive_logit = (positive - self.margin) / self.tau_sentence  # [S, k]
        denominator = torch.logaddexp(torch.logaddexp(positive_logit, rest[:, None]),
                                      torch.tensor(math.log(SENTENCE_LOG_EPS), device=match.device))
        loss_sent = -(positive_logit - denominator).mean()
        return loss_vid, loss_sent
