"""The LSTM sentence vector shared by TAN's integrator and MMN's GloVe encoder."""
import torch
from torch import nn


def last_word_states(lstm, queries, wordlens):
    """queries [S, L, E], wordlens [S] -> [S, hidden]: the LSTM's output at each
    sentence's last real word.

    The LSTM is a sliver of the cost; it stays in float32 under mixed precision
    (CPU backends have no float16 LSTM, and it keeps the recurrence accurate)."""
    with torch.autocast(queries.device.type, enabled=False):
        queries = queries.to(lstm.weight_ih_l0.dtype)
        if lstm.bidirectional:
            # Packing keeps the backward direction from reading the padding.
            packed = nn.utils.rnn.pack_padded_sequence(queries, wordlens.cpu(), batch_first=True,
                                                       enforce_sorted=False)
            out, _ = lstm(packed)
            out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
        else:
            out, _ = lstm(queries)  # padding after the last word cannot reach it
        last = (wordlens - 1).to(out.device).clamp(min=0)
        return out[torch.arange(out.shape[0], device=out.device), last]
