"""MMN's sentence branch (MODEL.MMN.TEXT_ENCODER.NAME; docs/mmn.md §3): a
sentence vector, layer-normalised, then two linear maps into the joint space:
``fc_out2`` for matching and ``fc_out1`` for the IoU score (MMN's names).

"BERT": DistilBERT over word pieces, averaged over the sentence's tokens
([CLS] and [SEP] included), as MMN does; frozen for the first
SOLVER.FREEZE_BERT epochs. "LSTM": our GloVe alternative that needs no
download, the LSTM output at the last word (TAN's sentence vector).
"""
import torch
from torch import nn

from ...errors import TanError
from ...utils.optional import require_transformers
from ..map2d.sentence import last_word_states

# The settings that ask for DistilBERT, and what to set instead, for the error without transformers.
NEEDS_BERT = "MODEL.MMN.TEXT_ENCODER.NAME 'BERT'"
WITHOUT_BERT = "set MODEL.MMN.TEXT_ENCODER.NAME LSTM to use GloVe vectors"


class JointProjection(nn.Module):
    """The sentence vector -> (matching, IoU) embeddings [S, J] each."""

    def __init__(self, size, joint_size):
        super().__init__()
        self.fc_out1 = nn.Linear(size, joint_size)  # IoU branch
        self.fc_out2 = nn.Linear(size, joint_size)  # matching branch
        self.layernorm = nn.LayerNorm(size)

    def project(self, sentence):
        sentence = self.layernorm(sentence)
        return self.fc_out2(sentence), self.fc_out1(sentence)


class LSTMTextEncoder(JointProjection):
    """GloVe vectors [S, L, E] -> the LSTM output at the last real word -> two embeddings."""

    def __init__(self, input_size, hidden_size, num_layers, bidirectional, joint_size):
        super().__init__(hidden_size, joint_size)
        self.lstm = nn.LSTM(input_size, hidden_size // 2 if bidirectional else hidden_size, num_layers=num_layers,
                            batch_first=True, bidirectional=bidirectional)

    def forward(self, queries, wordlens):
        return self.project(last_word_states(self.lstm, queries, wordlens))


def check_text_encoder(cfg):
    """Fail before any work when MMN's DistilBERT cannot be had: transformers is
    missing, or BERT.PRETRAINED names no model (its config is read, not its weights)."""
    if cfg.MODEL.MMN.TEXT_ENCODER.NAME == "BERT":
        _from_pretrained("AutoConfig", cfg.MODEL.MMN.TEXT_ENCODER.BERT.PRETRAINED)


def load_distilbert(pretrained):
    """DistilBERT from a hub name (downloaded and cached by transformers) or a local folder."""
    return _from_pretrained("AutoModel", pretrained)


def _from_pretrained(kind, pretrained):
    """transformers' ``kind`` (AutoModel, AutoConfig) of ``pretrained``; a clear error when it cannot be had."""
    loader = getattr(require_transformers(NEEDS_BERT, WITHOUT_BERT), kind)
    try:
        return loader.from_pretrained(pretrained)
    except (OSError, ValueError) as e:
        raise TanError(f"cannot load the DistilBERT model {pretrained!r} (MODEL.MMN.TEXT_ENCODER.BERT.PRETRAINED): "
                       f"{e}") from None


class BertTextEncoder(JointProjection):
    """Word-piece ids [S, L] -> DistilBERT -> mean over the first ``wordlens`` tokens -> two embeddings."""

    def __init__(self, bert, joint_size):
        super().__init__(bert.config.hidden_size if hasattr(bert.config, "hidden_size") else bert.config.dim,
                         joint_size)
        self.bert = bert
        self.frozen = False

    def forward(self, ids, wordlens):
        lengths = wordlens.to(ids.device)
        attention = (torch.arange(ids.shape[1], device=ids.device)[None] < lengths[:, None])
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.frozen):
            tokens = self.bert(input_ids=ids, attention_mask=attention.long())[0]  # [S, L, D]
        weights = attention.to(tokens.dtype) / lengths[:, None].to(tokens.dtype)
        return self.project(torch.einsum("sld,sl->sd", tokens, weights))


def build_text_encoder(cfg):
    mmn = cfg.MODEL.MMN
    encoder = mmn.TEXT_ENCODER
    if encoder.NAME == "BERT":
        return BertTextEncoder(load_distilbert(encoder.BERT.PRETRAINED), mmn.JOINT_SPACE_SIZE)
    lstm = encoder.LSTM
    return LSTMTextEncoder(cfg.INPUT.PRE_QUERY_SIZE, lstm.HIDDEN_SIZE, lstm.NUM_LAYERS, lstm.BIDIRECTIONAL,
                           mmn.JOINT_SPACE_SIZE)
