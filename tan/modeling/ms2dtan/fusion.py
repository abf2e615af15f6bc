"""The sentence and its fusion with each scale's map (docs/ms2dtan.md §4)."""
import torch
from torch import nn
from torch.nn import functional as F


class SentenceMapFusion(nn.Module):
    """An LSTM over the padded words, averaged over the real ones, projected to H and
    multiplied into a 1 x 1 conv of the map, then L2-normalised over channels and masked.

    The LSTM reads the padded batch as the reference does (no packing): with a
    bidirectional LSTM the backward direction starts in the padding, so a sentence's
    vector depends a little on the longest sentence of its batch."""

    def __init__(self, query_input_size, txt_hidden_size, num_layers, bidirectional, hidden_size):
        super().__init__()
        per_direction = txt_hidden_size // 2 if bidirectional else txt_hidden_size
        self.textual_encoder = nn.LSTM(query_input_size, per_direction, num_layers=num_layers,
                                       bidirectional=bidirectional, batch_first=True)
        self.tex_linear = nn.Linear(txt_hidden_size, hidden_size)
        self.vis_conv = nn.Conv2d(hidden_size, hidden_size, 1, 1)

    def encode_sentence(self, queries, wordlens):
        """queries [S, L, E], wordlens [S] -> [S, H]. The LSTM stays in float32 under mixed precision."""
        with torch.autocast(queries.device.type, enabled=False):
            queries = queries.to(self.textual_encoder.weight_ih_l0.dtype)
            words = torch.arange(queries.shape[1], device=queries.device)[None, :] < wordlens.to(queries.device)[:, None]
            words = words.to(queries.dtype)[..., None]  # [S, L, 1]
            states = self.textual_encoder(queries)[0] * words
            return self.tex_linear(states.sum(dim=1) / words.sum(dim=1))

    def forward(self, sentence, cells, valid):
        """sentence [S, H], cells [S, H, R, A], valid [S, 1, R, A] -> fused [S, H, R, A]."""
        fused = F.normalize(sentence[:, :, None, None] * self.vis_conv(cells), dim=1) * valid
        return fused.to(cells.dtype)  # the norm runs in float32 under autocast
