"""Training and evaluation: the step, the loop and its hooks, inference and metrics."""
from .inference import inference
from .state import TrainingState
from .step import run_step
from .trainer import do_train

__all__ = ["do_train", "run_step", "inference", "TrainingState"]
