"""Sentence encoding and fusion with the 2D map (docs/model.md §4)."""
from torch import nn
from torch.nn import functional as F

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
