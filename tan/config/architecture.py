"""Which settings subtree a run's model reads.

Every meta-architecture keeps its settings under MODEL.{ARCHITECTURE}
(MODEL.TAN, MODEL.MMN), with the same names for the parts they share
(NUM_CLIPS, FEATPOOL, FEAT2D, PREDICTOR), so that code that needs only the
map's geometry or the feature size reads them here without knowing the model.
"""
from ..errors import TanError

# The architectures with a settings subtree (MODEL.ARCHITECTURE).
ARCHITECTURES = ("TAN", "MMN")
# MODEL.MMN.TEXT_ENCODER.NAME: DistilBERT over word pieces, or an LSTM over GloVe vectors.
TEXT_ENCODERS = ("BERT", "LSTM")
# FEAT2D.NAME: the max-pooled map or the learned convolutional map.
FEAT2D_NAMES = ("pool", "conv")


def model_settings(cfg):
    """The MODEL.{ARCHITECTURE} node of ``cfg``."""
    arch = cfg.MODEL.ARCHITECTURE
    if arch not in ARCHITECTURES:
        raise TanError(f"config key MODEL.ARCHITECTURE: expected one of {', '.join(ARCHITECTURES)}, got {arch!r}")
    return cfg.MODEL[arch]


def model_key(cfg, key):
    """The full name of ``key`` in the architecture's subtree, for messages: MODEL.MMN.NUM_CLIPS."""
    return f"MODEL.{cfg.MODEL.ARCHITECTURE}.{key}"


def text_encoder_name(cfg):
    """How sentences enter the model: "BERT" (word-piece ids) or "LSTM" (GloVe vectors; always for TAN)."""
    settings = model_settings(cfg)
    return settings.TEXT_ENCODER.NAME if "TEXT_ENCODER" in settings else "LSTM"
