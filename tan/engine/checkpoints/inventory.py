"""The training checkpoints a run folder holds, latest in training first (model_best.pth, weights only,
is none of them), and how their files are looked at: read lazily or not at all, told apart by path."""
import os

from ...errors import TanError
from ...utils.checkpoint_file import FINAL, read_checkpoint
from .progress import progress_of_name, recorded_progress


def training_checkpoints(save_dir, unreadable=None):
    """The training checkpoints in ``save_dir`` (model_{e}e[_{it}it].pth and model_final.pth; not
    model_best.pth, which holds weights only), as [(progress, path)], latest in training first; the
    progress of model_final.pth is what it records (read lazily), and one that cannot be read is left out
    (``unreadable``: a list that gets what it says of it, so that a caller can name it)."""
    found = []
    for name in sorted(os.listdir(save_dir)) if save_dir and os.path.isdir(save_dir) else ():
        path = os.path.join(save_dir, name)
        progress = progress_of_name(name)
        if progress is None and name == FINAL and os.path.isfile(path):
            try:
                progress = recorded_progress(read_checkpoint(path, lazily=True))
            except TanError as e:
                if unreadable is not None:
                    unreadable.append((path, str(e)))
                continue
        if progress is not None and os.path.isfile(path):
            found.append((progress, path))
    # at equal progress model_final.pth first: the file a finished run's last_checkpoint names
    return sorted(found, key=lambda pair: (pair[0], os.path.basename(pair[1]) == FINAL), reverse=True)


def _read_or_none(path):
    """The checkpoint at ``path`` read lazily, None when it cannot be read."""
    try:
        return read_checkpoint(path, lazily=True)
    except TanError:
        return None


def _same_file(a, b):
    return a is not None and b is not None and os.path.abspath(a) == os.path.abspath(b)
