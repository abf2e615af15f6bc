"""Sentence encoding and fusion with the 2D map (docs/model.md §4)."""
import torch
from torch import nn
from torch.autograd.function import once_differentiable
from torch.nn import functional as F

from ..map2d.band import CONV_ARGS, autocast_now, cells_of, take, to_dense, with_slot
from ..map2d.ordered_sums import accumulate
from ..map2d.sentence import last_word_states


class SentenceMapFusion(nn.Module):
    def __init__(self, query_input_size, query_hidden_size, hidden_size, num_layers, bidirectional):
        super().__init__()
        self.bidirectional = bidirectional
        lstm_hidden = query_hidden_size // 2 if bidirectional else query_hidden_size
        self.lstm = nn.LSTM(query_input_size, lstm_hidden, num_layers=num_layers,
                            batch_first=True, bidirectional=bidirectional)
        self.fc = nn.Linear(query_hidden_size, hidden_size)
        self.conv = nn.Conv2d(hidden_size, hidden_size, 1)

    def encode_sentence(self, queries, wordlens):
        # queries: [B, L, E], wordlens: [B] -> [B, Hq] (output at the last real word)
        return last_word_states(self.lstm, queries, wordlens)

    def sentence(self, queries, wordlens):
        """[B, H]: the sentence in the map's channels."""
        return self.fc(self.encode_sentence(queries, wordlens))

    def forward(self, queries, wordlens, map2d):
        return self.fuse(self.sentence(queries, wordlens), map2d)

    def fuse(self, sentence, map2d):
        """sentence [B, H], map2d [B, H, N, N] -> the fused map [B, H, N, N]."""
        map2d = self.conv(map2d)
        fused = F.normalize(sentence[:, :, None, None] * map2d, dim=1)
        # Under autocast the norm runs in float32; keep the big map in the conv's dtype.
        return fused.to(map2d.dtype)


def build_integrator(cfg):
    tan = cfg.MODEL.TAN
    return SentenceMapFusion(cfg.INPUT.PRE_QUERY_SIZE, tan.INTEGRATOR.QUERY_HIDDEN_SIZE,
                             tan.FEATPOOL.HIDDEN_SIZE, tan.INTEGRATOR.LSTM.NUM_LAYERS,
                             tan.INTEGRATOR.LSTM.BIDIRECTIONAL)


class FusedBand(torch.autograd.Function):
    """:meth:`SentenceMapFusion.fuse` at the cells of the predictor's input band: the fused
    map's band ([B, H, M + 1], its slot zero), saving only the inputs.

    The 1 x 1 conv runs on the dense map, as in :meth:`fuse` (so its sums over the
    channels are blocked the same way); the product with the sentence and the
    normalisation, which are per cell, run on the band only. The backward recomputes
    the conv and runs, step by step, the operations autograd would run for the dense
    fusion (so float32 gradients are bit for bit those of the stored path): per cell
    on the band, and on dense maps where autograd sums over the map (the sentence's
    and the conv's gradients). ``where`` = (the valid cells' flat index, N, the
    sentences' videos or None, the band's cells as flat indices of the N x N map)."""

    @staticmethod
    def forward(ctx, cells, sentence, weight, bias, where):
        band = fused_band(cells, sentence, weight, bias, where)
        ctx.where, ctx.dtype = where, band.dtype
        ctx.save_for_backward(cells, sentence, weight, bias)
        return band

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_band):
        cells, sentence, weight, bias = ctx.saved_tensors
        where, dtype = ctx.where, ctx.dtype
        _, n, _, band_cells = where
        with torch.autocast(grad_band.device.type, enabled=False):
            weight, bias = weight.to(dtype), bias.to(dtype)
            x = _map(cells, where).to(dtype)
            m = take(F.conv2d(x, weight, bias).flatten(2), band_cells)
            s3 = sentence[:, :, None]
            p = s3 * m
            grad_p = _normalize_backward(p, cells_of(grad_band), band_cells, n).to(p.dtype)
            del p
            # autograd sums the sentence's gradient over the whole map (zero off the band)
            grad_s = to_dense(grad_p * m, band_cells, n).sum_to_size(s3.shape[:2] + (1, 1))
            del m
            grad_m = to_dense(grad_p.mul_(s3), band_cells, n)
            del grad_p
            # The input's gradient first, kept at the valid cells only, then the weight's: the
            # full-map gradient and the weight's workspace are never held together.
            grad_cells = None
            if ctx.needs_input_grad[0]:
                gx, _, _ = torch.ops.aten.convolution_backward(grad_m, x, weight, [weight.shape[0]], *CONV_ARGS,
                                                               [True, False, False])
                grad_cells = _map_backward(gx, where, cells.shape[0]).to(cells.dtype)
                del gx
            _, gw, gb = torch.ops.aten.convolution_backward(grad_m, x, weight, [weight.shape[0]], *CONV_ARGS,
                                                            [False, True, True])
        return grad_cells, grad_s.view(sentence.shape).to(sentence.dtype), gw, gb, None


def fused_band(cells, sentence, weight, bias, where):
    """:class:`FusedBand`'s output, computed without autograd (its forward, and its recomputation)."""
    m = take(F.conv2d(_map(cells, where), weight, bias).flatten(2), where[3])
    return with_slot(F.normalize(sentence[:, :, None] * m, dim=1).to(m.dtype))


def fused_band_recipe(cells, sentence, weight, bias, where):
    """(function, tensors): ``function(*tensors)`` computes :class:`FusedBand`'s output on these
    inputs again, later, as it is computed now (under the autocast setting in force now);
    the tensors are those FusedBand keeps anyway (BandConv's ``rebuild_input``)."""
    autocast = autocast_now(cells.device.type)

    def rebuild(*tensors):
        with autocast():
            return fused_band(*tensors, where)
    return rebuild, (cells, sentence, weight, bias)


def _map(cells, where):
    """The dense map of each sentence [B, H, N, N] from the videos' valid cells [V, H, C]."""
    valid, n, video_index, _ = where
    map2d = to_dense(cells, valid, n)
    return map2d[video_index] if video_index is not None else map2d


def _map_backward(grad_map, where, videos):
    """The valid cells' gradient [V, H, C] from that of the sentences' maps."""
    valid, _, video_index, _ = where
    if video_index is not None:  # the gather's backward: each video sums its sentences', in their order
        grad_map = accumulate(grad_map.new_zeros((videos,) + grad_map.shape[1:]), 0, video_index, grad_map)
    return take(grad_map.flatten(2), valid)


def _normalize_backward(p, grad, band_cells, n, eps=1e-12):
    """Gradient of F.normalize(p, dim=1) at a band [B, H, M] of an N x N map (``band_cells``), in
    float32 at least, from that of its output: autograd's formulas for the division, the clamp
    and the norm, in its order. Every step is per cell, so the band gives the dense map's
    values, except the sum over the channels, whose order of additions depends on a
    cell's place in the map: it runs on the dense map."""
    exact = torch.promote_types(p.dtype, torch.float32)  # float32 at least (float64 stays)
    p, grad = p.to(exact), grad.to(exact)
    norm = torch.linalg.vector_norm(p, 2, dim=1, keepdim=True)
    denom = norm.clamp_min(eps).expand_as(p)
    t = p / denom
    dense = to_dense(t.div_(denom).mul_(grad).neg_(), band_cells, n)
    del t
    grad_denom = take(dense.sum_to_size(dense.shape[:1] + (1,) + dense.shape[2:]).flatten(2), band_cells)
    del dense
    grad_p = grad / denom
    del grad
    grad_norm = torch.where(norm >= eps, grad_denom, torch.zeros((), device=p.device))
    return grad_p.add_(grad_norm * (p / norm).masked_fill_(norm == 0, 0))
