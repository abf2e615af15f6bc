from .inference import inference
from .trainer import NonFiniteLossError, do_train

__all__ = ["do_train", "inference", "NonFiniteLossError"]
