"""The run's checkpoint policy (docs/checkpoints.md): the training checkpoints' names and where in
training each was saved (progress), which of them a run folder holds (inventory), the marker
``last_checkpoint`` that names the latest one and a save cut short before it could (marker), which
checkpoint a run resumes from or a tool takes, and what is refused (resume), and saving and loading
(checkpointer: Checkpointer, run_info).

Files are ``OUTPUT_DIR/model_{epoch}e.pth`` and ``model_final.pth``; the file ``last_checkpoint``
holds the name of the latest one, relative to OUTPUT_DIR. Every write is atomic, so an interrupted
save leaves the previous state. What a checkpoint file holds and how it is read is a utility below
the config: tan.utils.checkpoint_file."""
from .checkpointer import Checkpointer, run_info
from .inventory import training_checkpoints
from .marker import last_checkpoint, last_checkpoint_file, marked_file, marker_stamp, unmarked_save
from .progress import name_of_progress, progress_of_name, recorded_progress
from .resume import default_checkpoint, latest_checkpoint

__all__ = ["Checkpointer", "default_checkpoint", "last_checkpoint", "last_checkpoint_file", "latest_checkpoint",
           "marked_file", "marker_stamp", "name_of_progress", "progress_of_name", "recorded_progress", "run_info",
           "training_checkpoints", "unmarked_save"]
