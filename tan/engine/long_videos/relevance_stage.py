"""The relevance stage of grounding by windows: rank a long video's windows for each sentence, ground
the sentence with the full model in its top TEST.WINDOW.TOP_K windows only, and give each kept moment
a final score from its own and its window's (docs/long_videos.md).

Every window of a long video is first scored against each sentence by a cheap head
(tan.modeling.relevance: the model's learned one, or the parameter-free "pooled" cosine), so the
full model's cost follows TOP_K, not the video's length. A moment's final score is, with
TEST.WINDOW.SCORE "product", its score times its window's relevance as a probability over the video's
windows (a softmax at the head's temperature): a window the sentence is not about cannot put its
moments first however well they fit inside it; with "sum", CONE's fusion: the moment scores and
the window relevances, each min-max normalised over the sentence's kept moments, added.
TEST.WINDOW.NORMALIZE min-max normalises the moment scores per sentence before either (alone, without
a relevance stage, it changes no order).
"""
from typing import NamedTuple

import torch

from ...config.architecture import feature_size
from ...data.collate import pad_sentences
from ...errors import TanError
from ...modeling.relevance import PooledRelevance, sentence_width
from ..wrappers import unwrap


class RelevanceStage(NamedTuple):
    """A relevance ``head`` (encode_windows, encode_sentences, logits), the ``top_k`` windows each
    sentence keeps, how scores combine (``score``: "product" or "sum"), and what chose the head."""
    head: object
    top_k: int
    score: str
    source: str

    def describe(self):
        combine = ("its score times its window's relevance" if self.score == "product"
                   else "its score and its window's relevance, each min-max normalised, added")
        return (f"each sentence grounded in its top {self.top_k} windows by {self.source} "
                f"(TEST.WINDOW.TOP_K); a moment's final score: {combine}")

    def kept(self, logits):
        """Each sentence's top windows: [S, min(top_k, W)] indices, best first, of ``logits`` [S, W]."""
        return logits.topk(min(self.top_k, logits.shape[1]), dim=1).indices


def relevance_stage(cfg, model):
    """The stage TEST.WINDOW.RELEVANCE asks of ``model`` (None: every window is grounded)."""
    core, choice = unwrap(model), cfg.TEST.WINDOW.RELEVANCE
    head = core.relevance
    if choice == "none" or (choice == "auto" and head is None):
        return None
    if choice == "learned" and head is None:
        raise TanError("TEST.WINDOW.RELEVANCE 'learned': the model has no relevance head (it was trained "
                       "without MODEL.RELEVANCE.ENABLED); use 'pooled', 'none' or 'auto'")
    if choice == "pooled":
        head = PooledRelevance(feature_size(cfg, core)[0], sentence_width(cfg, core.text_input(cfg)),
                               cfg.MODEL.RELEVANCE.TEMPERATURE)
        return RelevanceStage(head, int(cfg.TEST.WINDOW.TOP_K), cfg.TEST.WINDOW.SCORE,
                              "the cosine of the sentence's mean vector with each window's best row")
    return RelevanceStage(head, int(cfg.TEST.WINDOW.TOP_K), cfg.TEST.WINDOW.SCORE, "the model's relevance head")


def check_top_k(stage, windows, what):
    """Refuse a TEST.WINDOW.TOP_K above the ``windows`` there are (``what``: whose windows, for the message)."""
    if stage is not None and stage.top_k > windows:
        raise TanError(f"TEST.WINDOW.TOP_K {stage.top_k} is above the {windows} windows of {what}: the relevance "
                       f"stage would keep every window; give at most {windows}")


def final_scores(stage, normalize, scores, logits, probability):
    """A sentence's kept moments' final scores: ``scores`` [C] their own, ``logits`` and ``probability``
    [C] their windows' relevance (None without a stage)."""
    if normalize or (stage is not None and stage.score == "sum"):
        scores = min_max(scores)
    if stage is None:
        return scores
    if stage.score == "product":
        return scores * probability
    return scores + min_max(logits)


def min_max(values):
    """``values`` [C] mapped to [0, 1] (all 1 when they are equal)."""
    if not len(values):
        return values
    low, high = values.min(), values.max()
    return (values - low) / (high - low) if high > low else torch.ones_like(values)


# Windows whose relevance is computed per forward of the head (it holds [W, P, H] of them at once).
RELEVANCE_BATCH = 64


def window_relevance(stage, video, bounds, encoded_sentences, prepare, device, cfg):
    """[S, W] relevance logits of every sentence for every window (``bounds``: their rows), on the CPU."""
    head = stage.head
    queries, lengths = pad_sentences(encoded_sentences, cfg.INPUT.PRE_QUERY_SIZE)
    sentences = head.encode_sentences(queries.to(device), lengths)
    logits = []
    for first in range(0, len(bounds), RELEVANCE_BATCH):
        prepared = [prepare(video.features[a:b]) for a, b, _, _ in bounds[first:first + RELEVANCE_BATCH]]
        rows = torch.stack([p[0] for p in prepared]).to(device)
        logits.append(head.logits(sentences, head.encode_windows(rows), [p[1] for p in prepared]).float().cpu())
    return torch.cat(logits, 1)
