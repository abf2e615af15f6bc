"""Published weights in their own file formats: SlowFast's Caffe2 pickle, openai CLIP's TorchScript
archive. A file that is missing, truncated, or of another model is refused naming it, what was
expected, and where users get the right one."""
from .files import WeightsFileError, weights_error

__all__ = ["WeightsFileError", "weights_error"]
