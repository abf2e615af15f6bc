"""Sentence encoding and fusion with the 2D map (docs/model.md §4)."""
import torch
from torch import nn
from torch.nn import functional as F


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
        # The LSTM is a sliver of the cost; it stays in float32 under mixed
        # precision (CPU backends have no float16 LSTM, and it keeps the
        # recurrence accurate).
        with torch.autocast(queries.device.type, enabled=False):
            return self._encode_float32(queries.to(self.fc.weight.dtype), wordlens)

    def _encode_float32(self, queries, wordlens):
        if self.bidirectional:
            # Packing keeps the backward direction from reading the padding.
            packed = nn.utils.rnn.pack_padded_sequence(queries, wordlens.cpu(), batch_first=True,
                                                       enforce_sorted=False)
            out, _ = self.lstm(packed)
            out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
        else:
            out, _ = self.lstm(queries)  # padding after the last word cannot reach it
        last = (wordlens - 1).to(out.device).clamp(min=0)
        return out[torch.arange(out.shape[0], device=out.device), last]

    def forward(self, queries, wordlens, map2d):
        sentence = self.fc(self.encode_sentence(queries, wordlens))  # [B, H]
        map2d = self.conv(map2d)  # [B, H, N, N]
        fused = F.normalize(sentence[:, :, None, None] * map2d, dim=1)
        # Under autocast the norm runs in float32; keep the big map in the conv's dtype.
        return fused.to(map2d.dtype)


def build_integrator(cfg):
    tan = cfg.MODEL.TAN
    return SentenceMapFusion(cfg.INPUT.PRE_QUERY_SIZE, tan.INTEGRATOR.QUERY_HIDDEN_SIZE,
                             tan.FEATPOOL.HIDDEN_SIZE, tan.INTEGRATOR.LSTM.NUM_LAYERS,
                             tan.INTEGRATOR.LSTM.BIDIRECTIONAL)
