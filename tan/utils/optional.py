"""Optional packages, imported only where a config asks for them, with an
error that says how to get them."""
from ..errors import TanError


def require_transformers():
    """The transformers package, for MMN's DistilBERT (MODEL.MMN.TEXT_ENCODER.NAME "BERT")."""
    try:
        import transformers
    except ImportError:
        raise TanError("MODEL.MMN.TEXT_ENCODER.NAME 'BERT' needs the transformers package: pip install "
                       "'tan[bert]', or set MODEL.MMN.TEXT_ENCODER.NAME LSTM to use GloVe vectors") from None
    return transformers
