"""Training and evaluation: the trainer, its step and hooks, inference and metrics."""
from .inference import inference
from .state import TrainingState
from .step import run_step
from ..utils.hooks import HookBase
from .trainer import TRAINERS, Trainer, build_trainer, register_trainer, trainer_class
from .wrappers import unwrap

__all__ = ["HookBase", "TRAINERS", "Trainer", "TrainingState", "build_trainer", "inference", "register_trainer",
           "run_step", "trainer_class", "unwrap"]
