"""The cross-window losses: training that ranks the windows of a video against each other
(docs/long_videos.md). Part of the model (GroundingModel.forward computes them in training), so that
one forward holds every use of every parameter, as DistributedDataParallel needs.

Trained on windows one at a time, a model learns how well a moment fits
inside a window, not which of a video's windows holds what is asked, and
grounding an hour-long video is that second question over hundreds of
windows. Here each training query is also scored against the windows of its
video that its batch brought (INPUT.TRAIN_WINDOW.RANKED_WINDOWS, joined by
tan.data.collate.collate_ranked into a tan.structures.ranked_windows.RankedWindows: each window
encoded once for every sentence of its video), and a listwise loss, as SOONet's over a whole movie, puts the
window holding its moment above the others:

- ``window_relevance``: the relevance head's logits (MODEL.RELEVANCE), the window holding the
  moment scored by the moment's own rows (tan.modeling.relevance.RelevanceHead.training_logits);
- ``window_ranking``: the model's own scores in the window holding the moment
  and MODEL.WINDOW_RANKING.WINDOWS others (each costs a map), a window's score
  being its best cell's, over MODEL.WINDOW_RANKING.TEMPERATURE: the best cell of
  each window without the moment is pushed below the window holding it (which
  is left to the model's own loss), so that the scores the merge compares across
  windows are trained to be compared.
"""
from typing import NamedTuple

import torch

from ..config.checks import is_int, is_number, register_config_check
from ..config.models import need


def listwise_loss(logits, query, labels, sentences):
    """Mean over the sentences that have a window with their moment and one without of
    -log(sum of softmax over the sentence's windows of those with it); ``logits``, ``query``
    (each pair's sentence, below ``sentences``) and ``labels`` (1 or 0) are [M]. Sums per
    sentence by index, so that nothing waits for the device."""
    logits, labels = logits.float(), labels.float()
    peak = logits.new_full((sentences,), float("-inf")).scatter_reduce(0, query, logits.detach(), "amax")
    shifted = torch.exp(logits - peak[query])
    every = logits.new_zeros(sentences).index_add(0, query, shifted)
    held = logits.new_zeros(sentences).index_add(0, query, shifted * labels)
    positives = labels.new_zeros(sentences).index_add(0, query, labels)
    counts = labels.new_zeros(sentences).index_add(0, query, torch.ones_like(labels))
    ranked = (positives > 0) & (positives < counts)
    losses = torch.where(ranked, torch.log(every) - torch.log(held.clamp(min=1e-30)), torch.zeros_like(every))
    return losses.sum() / ranked.sum().clamp(min=1)


class CrossWindowLosses(NamedTuple):
    """The weights of the two losses over a video's windows: the relevance head's
    (MODEL.RELEVANCE.LOSS_WEIGHT) and the model's own scores' (MODEL.WINDOW_RANKING)."""
    relevance_weight: float
    ranking_weight: float
    ranking_temperature: float
    ranking_windows: int

    @classmethod
    def from_config(cls, cfg):
        """The losses MODEL.RELEVANCE and MODEL.WINDOW_RANKING ask for, or None when neither is on."""
        relevance, ranking = cfg.MODEL.RELEVANCE, cfg.MODEL.WINDOW_RANKING
        losses = cls(float(relevance.LOSS_WEIGHT) if relevance.ENABLED else 0.0, float(ranking.LOSS_WEIGHT),
                     float(ranking.TEMPERATURE), int(ranking.WINDOWS))
        return losses if losses.relevance_weight or losses.ranking_weight else None


def cross_window_terms(model, ranked, queries, wordlens):
    """{name: float32 scalar}: the cross-window loss terms of a training batch for ``model`` (a
    GroundingModel with ``window_losses``), from its ``ranked`` windows (a tan.structures.ranked_windows.RankedWindows,
    or None when no item of the batch brought any) and its sentences; called inside the model's forward."""
    losses, terms = model.window_losses, {}
    if ranked is not None and not len(ranked):
        ranked = None  # windows but no pair to rank
    if losses.relevance_weight:
        with torch.autocast(queries.device.type, enabled=False):  # the head's cosines in float32
            terms["window_relevance"] = losses.relevance_weight * _relevance_term(model.relevance, ranked, queries,
                                                                                 wordlens)
    if losses.ranking_weight and ranked is not None:
        terms["window_ranking"] = losses.ranking_weight * _ranking_term(model, ranked, queries, wordlens, losses)
    return terms


def _relevance_term(head, ranked, queries, wordlens):
    if ranked is None:  # no long video in the batch: a zero that still reaches every parameter
        return sum(p.sum() for p in head.parameters()) * 0.0
    pairs = (ranked.query, ranked.window)
    sentences = head.encode_sentences(queries, wordlens)
    logits = head.training_logits(sentences, head.encode_windows(ranked.feats), pairs, ranked.rows, ranked.labels)
    return listwise_loss(logits, ranked.query, ranked.labels, len(queries))


def _ranking_term(model, ranked, queries, wordlens, losses):
    # The full model grounds each sentence in the window its item drew with the moment and the next
    # MODEL.WINDOW_RANKING.WINDOWS it drew (its nearest neighbours first): its cost per pair is a map's,
    # where the relevance head ranks every window of the video in the batch.
    drawn = (ranked.order >= 0) & (ranked.order <= losses.ranking_windows)
    query, window, labels = ranked.pairs_where(drawn)
    maps = model.encode_video(ranked.feats)
    output = model.ground(maps, queries[query], wordlens[query.cpu()], video_index=window)
    logits = best_scores(model.scores(output)) / losses.ranking_temperature
    # The window holding the moment is the reference, not pushed up: its best cell may be another moment
    # than the asked one, and its cells are the model's own loss's to place. What is pushed down is the
    # best cell of each window without the moment, below the reference.
    logits = torch.where(labels > 0, logits.detach(), logits)
    return listwise_loss(logits, query, labels, len(queries))


def best_scores(scores):
    """[B] each sentence's best cell of the model's ``scores``: a map [B, ...] (0 outside its valid
    cells, below or at any valid one's), or a list of maps (one per scale)."""
    maps = scores if isinstance(scores, (list, tuple)) else [scores]
    return torch.stack([m.float().flatten(1).amax(1) for m in maps]).amax(0)


@register_config_check("MODEL.RELEVANCE and MODEL.WINDOW_RANKING")
def check_window_stage_settings(cfg):
    """MODEL.RELEVANCE and MODEL.WINDOW_RANKING: sizes and weights, and the windows they rank in training."""
    relevance, ranking = cfg.MODEL.RELEVANCE, cfg.MODEL.WINDOW_RANKING
    need(is_int(relevance.HIDDEN_SIZE) and relevance.HIDDEN_SIZE >= 1, "MODEL.RELEVANCE.HIDDEN_SIZE",
         f"expected an integer >= 1, got {relevance.HIDDEN_SIZE!r}")
    for node, name in ((relevance, "MODEL.RELEVANCE"), (ranking, "MODEL.WINDOW_RANKING")):
        need(is_number(node.TEMPERATURE) and node.TEMPERATURE > 0, f"{name}.TEMPERATURE",
             f"expected a positive number, got {node.TEMPERATURE!r}")
        need(is_number(node.LOSS_WEIGHT) and node.LOSS_WEIGHT >= 0, f"{name}.LOSS_WEIGHT",
             f"expected a weight >= 0, got {node.LOSS_WEIGHT!r}")
    need(is_int(ranking.WINDOWS) and ranking.WINDOWS >= 1, "MODEL.WINDOW_RANKING.WINDOWS",
         f"expected a number of windows >= 1, got {ranking.WINDOWS!r}")
    ranked = cfg.INPUT.TRAIN_WINDOW.RANKED_WINDOWS
    need(is_int(ranked) and ranked >= 0, "INPUT.TRAIN_WINDOW.RANKED_WINDOWS",
         f"expected a number of windows >= 0, got {ranked!r}")
    wanted = [what for what, on in (
        ("the relevance head's loss (MODEL.RELEVANCE.ENABLED True, MODEL.RELEVANCE.LOSS_WEIGHT "
         f"{relevance.LOSS_WEIGHT:g})", relevance.ENABLED and relevance.LOSS_WEIGHT),
        (f"the model's ranking loss (MODEL.WINDOW_RANKING.LOSS_WEIGHT {ranking.LOSS_WEIGHT:g})",
         ranking.LOSS_WEIGHT)) if on]
    need(ranked or not wanted, "INPUT.TRAIN_WINDOW.RANKED_WINDOWS",
         f"0 gives {' and '.join(wanted)} no windows to rank: in training, each query is ranked in this many "
         f"windows of its video. Set it to 1 or more (4, say), or turn the loss off")
