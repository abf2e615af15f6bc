"""Where in training a training checkpoint was saved, as (epoch, steps of it done): what its name
says (model_{epoch}e.pth, model_{epoch}e_{it}it.pth), what its fields record, the name training gives
each point, and a checkpoint whose name says another point than it holds."""
import os
import re

# The training checkpoints' names: model_{epoch}e.pth at the end of an epoch, model_{epoch}e_{it}it.pth
# within it (a stop), model_final.pth after the last one.
_EPOCH_NAME = re.compile(r"model_(\d+)e(?:_(\d+)it)?\.pth")


def progress_of_name(name):
    """Where in training the checkpoint file ``name`` was saved, as (epoch, steps of it done): the
    epoch in progress or next to train, as its TrainingState records it; None for model_final.pth
    (it says only "the end"; its fields say which) and names training does not write."""
    match = _EPOCH_NAME.fullmatch(name)
    if not match:
        return None
    epoch, steps = int(match.group(1)), match.group(2)
    return (epoch, int(steps)) if steps else (epoch + 1, 0)


def recorded_progress(checkpoint):
    """(epoch, steps of it done) that a training checkpoint records; None when it records none."""
    epoch = checkpoint.get("epoch") if isinstance(checkpoint, dict) else None
    steps = checkpoint.get("iter_in_epoch", 0) if isinstance(checkpoint, dict) else 0
    if not (isinstance(epoch, int) and isinstance(steps, int)):
        return None
    return epoch, steps


def name_of_progress(progress):
    """The file name training gives the checkpoint of ``progress`` (epoch, steps of it done)."""
    epoch, steps = progress
    return f"model_{epoch}e_{steps}it.pth" if steps else f"model_{epoch - 1}e.pth"


def _misnamed(path, checkpoint):
    """(the progress its name says, the progress it records) of a training checkpoint whose name says
    another point in training than it holds (a file renamed or copied over another); else None."""
    named, recorded = progress_of_name(os.path.basename(path)), recorded_progress(checkpoint)
    return (named, recorded) if named and recorded and named != recorded else None


def _progress_text(progress):
    epoch, steps = progress
    return f"in epoch {epoch} after {steps} steps" if steps else f"after epoch {epoch - 1}"
