"""Training and evaluation: the trainer, its step and hooks, inference and metrics."""
from .inference import inference
from .state import TrainingState
from .step import run_step
from .trainer import TRAINERS, Trainer, register_trainer, trainer_class

__all__ = ["TRAINERS", "Trainer", "TrainingState", "inference", "register_trainer", "run_step", "trainer_class"]
