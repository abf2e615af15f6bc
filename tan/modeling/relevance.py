"""Window relevance: a cheap score of how well a window of a long video matches a sentence.

A window's 2D map says how well a moment fits inside that window, not whether
the window holds what is asked; over the hundreds of windows of an hour-long
video, some window without the action always offers a moment that fits.
Methods that ground hour-long videos well first rank the windows: CONE by the
best match of a window's frames with the sentence in a contrastive space,
RGNet by a learned retrieval score trained against the other clips of the
same video. This head does the first in a learned space, and is trained the
second way (tan.modeling.window_losses): each row of a window and the sentence
are projected to MODEL.RELEVANCE.HIDDEN_SIZE and L2-normalised, and the
window's score is its best row's cosine with the sentence, over a
temperature. Grounding then runs the full model on the top
TEST.WINDOW.TOP_K windows only (tan.engine.long_videos.relevance_stage).

The head is an optional part of any model, built-in or a plug-in's, its submodule
``relevance`` (MODEL.RELEVANCE.ENABLED; tan.modeling.GroundingModel): it reads the model's own inputs,
the window's rows as the model's clip input prepares them and the sentence
as its text input encodes it (vectors, or token ids embedded by hashing), so
that nothing of the model needs to change. :class:`PooledRelevance` is the
parameter-free form (TEST.WINDOW.RELEVANCE "pooled"), for features and
sentence vectors made in one space (CLIP's).
"""
import torch
import torch.nn.functional as F
from torch import nn

from ..data.text.inputs import text_input_class
from ..errors import TanError

# Token ids of a text input (word pieces, whitespace words) share this many embedding rows by hashing:
# the head learns a bag of the sentence's tokens without knowing the vocabulary's size.
ID_BUCKETS = 1 << 15


def real_positions(lengths, size, device):
    """[N, size] True at the first ``lengths[n]`` positions of each row (the rest is padding)."""
    return torch.arange(size, device=device)[None, :] < torch.as_tensor(lengths, device=device)[:, None]


def masked_rows(windows, counts):
    """[W, P] True for the real rows of windows [W, P, ...] (all of them when ``counts`` is None)."""
    if counts is None:
        return torch.ones(windows.shape[:2], dtype=torch.bool, device=windows.device)
    return real_positions(counts, windows.shape[1], windows.device)


def mean_of_words(words, wordlens):
    """[S, L, H] a vector per word, padded after ``wordlens`` -> [S, H] each sentence's mean."""
    present = real_positions(wordlens, words.shape[1], words.device).float()
    return (words * present[..., None]).sum(1) / present.sum(1, keepdim=True).clamp(min=1.0)


def best_row_cosine(sentences, windows, mask, pairs=None):
    """Cosine of each sentence [S, H] with each window's best row (windows [W, P, H], unit rows; mask [W, P]):
    [S, W], or [M] for the (sentence, window) ``pairs`` ([M], [M])."""
    if pairs is None:
        cosine = torch.einsum("sh,wph->swp", sentences, windows)
        return cosine.masked_fill(~mask[None], float("-inf")).amax(-1)
    return pair_cosines(sentences, windows, pairs).masked_fill(~mask[pairs[1]], float("-inf")).amax(-1)


def pair_cosines(sentences, windows, pairs):
    """[M, P] the cosine of the sentence [S, H] of each (sentence, window) pair ([M], [M]) with every row
    of its window [W, P, H]."""
    s, w = pairs
    return torch.einsum("mh,mph->mp", sentences[s], windows[w])


class RelevanceHead(nn.Module):
    """What both forms share: a window's logit for a sentence is its best row's cosine with it, over
    the temperature. A form gives ``encode_windows`` (unit rows) and ``encode_sentences`` (unit vectors)."""

    def logits(self, sentences, windows, counts=None, pairs=None):
        """Relevance logits: each encoded sentence [S, H] against each encoded window [W, P, H] ([S, W]),
        or of the (sentence, window) ``pairs`` ([M])."""
        return best_row_cosine(sentences, windows, masked_rows(windows, counts), pairs) / self.temperature

    def training_logits(self, sentences, windows, pairs, rows, labels):
        """[M] the logits a training batch ranks by, of the (sentence, window) ``pairs`` ([M], [M]) of
        encoded sentences [S, H] and windows [W, P, H]: a window without the sentence's moment (``labels``
        0) by its best row among ``rows`` ([M, 2]: first, last; its real rows), as grounding scores it;
        the window holding it (1) by the mean cosine of the moment's own ``rows``.

        Pushing up the best row of the window holding the moment would push up whichever row the
        untrained head happens to prefer, most often one of noise: the rows of the moment are known,
        and each of them learns the sentence. Grounding's best row scores at least their mean."""
        cosine = pair_cosines(sentences, windows, pairs)
        positions = torch.arange(cosine.shape[1], device=cosine.device)[None]
        inside = (positions >= rows[:, :1]) & (positions < rows[:, 1:])
        moment = (cosine * inside).sum(1) / inside.sum(1).clamp(min=1)
        best = cosine.masked_fill(~inside, float("-inf")).amax(1)
        return torch.where(labels > 0, moment, best) / self.temperature


class WindowRelevance(RelevanceHead):
    """The learned head: rows and sentences projected to one space (MODEL.RELEVANCE)."""

    def __init__(self, clip_size, query_size, hidden_size, temperature):
        """``query_size``: the width of the sentence vectors, or None for token ids."""
        super().__init__()
        self.temperature = float(temperature)
        self.rows = nn.Sequential(nn.Linear(clip_size, hidden_size), nn.ReLU(), nn.Linear(hidden_size, hidden_size))
        self.reads_ids = query_size is None
        # Each word through a layer of its own before the mean (a bag of words, as a sentence's words add up
        # to what a moment shows), then one layer over the mean.
        words = nn.Embedding(ID_BUCKETS, hidden_size) if self.reads_ids else nn.Linear(query_size, hidden_size)
        self.words = nn.Sequential(words, nn.ReLU(), nn.Linear(hidden_size, hidden_size))
        self.sentence = nn.Sequential(nn.ReLU(), nn.Linear(hidden_size, hidden_size))

    def encode_windows(self, feats):
        """Windows' rows [W, P, D_in] as the model takes them -> unit rows [W, P, H]."""
        return F.normalize(self.rows(feats.float()), dim=-1)

    def encode_sentences(self, queries, wordlens):
        """Sentences [S, L, E] (or token ids [S, L]) with their lengths -> unit vectors [S, H]: the mean
        of their words, each through two layers, through a layer."""
        if self.reads_ids != (not torch.is_floating_point(queries)):
            expected = "token ids" if self.reads_ids else "vectors"
            raise TanError(f"the window relevance head (MODEL.RELEVANCE) was built for sentences as {expected}, and "
                           f"got {'vectors' if torch.is_floating_point(queries) else 'token ids'}: the model's text "
                           f"input is not the one it was trained with")
        words = self.words(queries.long() % ID_BUCKETS if self.reads_ids else queries.float())
        return F.normalize(self.sentence(mean_of_words(words, wordlens)), dim=-1)


class PooledRelevance(RelevanceHead):
    """The parameter-free form: the mean of the sentence's vectors against the window's rows, in the
    space they were made in (TEST.WINDOW.RELEVANCE "pooled")."""

    reads_ids = False

    def __init__(self, clip_size, query_size, temperature):
        super().__init__()
        if query_size is None or query_size != clip_size:
            raise TanError(f"TEST.WINDOW.RELEVANCE 'pooled' compares the sentence's vectors with the clip features "
                           f"directly: it needs both of one width and space, and the clip features are {clip_size} "
                           f"wide where the sentences are "
                           f"{'token ids' if query_size is None else f'{query_size} wide (INPUT.PRE_QUERY_SIZE)'}; "
                           f"train a relevance head (MODEL.RELEVANCE.ENABLED) instead")
        self.temperature = float(temperature)

    def encode_windows(self, feats):
        return F.normalize(feats.float(), dim=-1)

    def encode_sentences(self, queries, wordlens):
        if not torch.is_floating_point(queries):
            raise TanError("TEST.WINDOW.RELEVANCE 'pooled' needs sentences as vectors, and got token ids")
        return F.normalize(mean_of_words(queries.float(), wordlens), dim=-1)


def sentence_width(cfg, text_input):
    """The width of the sentence vectors of ``text_input`` (a TextInputChoice), or None for token ids."""
    return None if text_input_class(text_input).GIVES_IDS else int(cfg.INPUT.PRE_QUERY_SIZE)


def relevance_head(cfg, model_class, clip_size):
    """The learned relevance head MODEL.RELEVANCE asks of a model of ``model_class`` taking clip rows
    ``clip_size`` wide, or None when MODEL.RELEVANCE.ENABLED is off."""
    settings = cfg.MODEL.RELEVANCE
    if not settings.ENABLED:
        return None
    return WindowRelevance(clip_size, sentence_width(cfg, model_class.text_input(cfg)), settings.HIDDEN_SIZE,
                           settings.TEMPERATURE)
