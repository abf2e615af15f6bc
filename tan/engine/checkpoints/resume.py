"""Which checkpoint a run resumes from, and a tool takes when none is named: what last_checkpoint names,
or the latest readable one when it cannot be read; and the refusals: another model's checkpoint, going
back past a later one, writing over a file that is no checkpoint of this run, a renamed one."""
import os

from ...errors import TanError
from ...utils.checkpoint_file import FINAL, LAST_CHECKPOINT, read_checkpoint, stored_architecture
from .inventory import _read_or_none, _same_file, training_checkpoints
from .marker import last_checkpoint_file, marked_file
from .progress import _misnamed, _progress_text, name_of_progress, progress_of_name, recorded_progress


def _another_model(checkpoint, architecture):
    """The model a checkpoint records when it is not ``architecture`` (a run's MODEL.ARCHITECTURE, None:
    unknown), else None."""
    other = stored_architecture(checkpoint)
    return other if architecture and other and other != architecture else None


def _not_of_this_run(path, checkpoint, architecture):
    """What makes checkpoint ``path`` of a run folder no checkpoint of this run (``architecture``: its
    MODEL.ARCHITECTURE, None when unknown): another model's, or a name that says another point in
    training than the file holds; None when nothing does."""
    name = os.path.basename(path)
    other = _another_model(checkpoint, architecture)
    if other:
        return f"{name} is a checkpoint of another model ({other}, where this run's model is {architecture})"
    misnamed = _misnamed(path, checkpoint)
    if misnamed:
        named, recorded = misnamed
        return (f"{name}'s name says it was saved {_progress_text(named)}, but it holds the state "
                f"{_progress_text(recorded)}")
    return None


def latest_checkpoint(save_dir, read=read_checkpoint, resuming=True, architecture=None):
    """(path, checkpoint, warning) of the checkpoint to resume ``save_dir`` from: what last_checkpoint
    names; when that file or the checkpoint it names cannot be read, the latest readable one by
    training progress (``warning`` says why, and names every checkpoint passed over and why);
    (None, None, None) without last_checkpoint.

    ``architecture``: the run's MODEL.ARCHITECTURE. A checkpoint of another model is refused where
    last_checkpoint names it, and passed over as a fallback. ``resuming``: it never goes back past a
    readable checkpoint saved later in training than the one it resumes from, and never writes over a
    file that is no checkpoint of this run (another model's, or one whose name says another point in
    training than it holds): each is an error, as resuming would train those steps again and overwrite
    the later files. ``read``: how a checkpoint is read (:func:`read_checkpoint`)."""
    latest, problem = last_checkpoint_file(save_dir)
    if latest is None and problem is None:
        return None, None, None
    if latest is not None:
        try:
            checkpoint = read(latest)
        except TanError as e:
            problem = str(e)
        else:
            _refuse_another_model(save_dir, latest, checkpoint, architecture, resuming)
            written_over = []
            if resuming:
                written_over = _refuse_going_back(save_dir, latest, checkpoint, architecture)
                _refuse_misnamed(save_dir, latest, checkpoint)
            return latest, checkpoint, "; ".join([*_cut_short(save_dir, latest), *written_over]) or None
    unreadable = []
    passed_over = []  # what a fallback went past, named in its warning: each file it passed over and why
    for _, path in training_checkpoints(save_dir, unreadable):
        if _same_file(path, latest):
            continue
        try:
            checkpoint = read(path)
        except TanError as e:
            passed_over.append(str(e))
            continue
        why_not = _not_of_this_run(path, checkpoint, architecture)
        if why_not:
            passed_over.append(f"{why_not}: passed over")
            continue
        if resuming:
            _refuse_going_back(save_dir, path, checkpoint, architecture)
        return path, checkpoint, "; ".join([problem, *_named(unreadable, latest), *passed_over,
                                            f"falling back to the latest readable checkpoint in training order, "
                                            f"{path}"])
    # without last_checkpoint a model_final.pth is taken for a finished run's: it has to go too
    final = os.path.join(save_dir, FINAL)
    also_final = f" and {final}" if os.path.lexists(final) else ""
    advice = (f"remove {os.path.join(save_dir, LAST_CHECKPOINT)}{also_final} to train from scratch" if resuming else
              "name a readable checkpoint file with --ckpt")
    skipped = "".join(f"; {why}" for why in [*_named(unreadable, latest), *passed_over])
    raise TanError(f"{problem}{skipped}, and no other checkpoint in {save_dir} can be read; {advice}")


def _cut_short(save_dir, latest):
    """What is said when ``latest`` is a save that last_checkpoint does not name yet (:func:`unmarked_save`)."""
    marked = marked_file(save_dir)[0]
    if marked is None or _same_file(marked, latest):
        return []
    return [f"{os.path.join(save_dir, LAST_CHECKPOINT)} names {os.path.basename(marked)}, but "
            f"{os.path.basename(latest)} was saved after it, whole, by a save stopped before it could update "
            f"last_checkpoint: taking {os.path.basename(latest)}"]


def _named(unreadable, latest):
    """What :func:`training_checkpoints` said of the files it could not read, less the one already named."""
    return [why for path, why in unreadable if not _same_file(path, latest)]


def _refuse_another_model(save_dir, latest, checkpoint, architecture, resuming):
    """A TanError when the checkpoint that last_checkpoint names is another model's."""
    other = _another_model(checkpoint, architecture)
    if not other:
        return
    name = os.path.basename(latest)
    own = next((path for _, path in training_checkpoints(save_dir) if not _same_file(path, latest)
                and _is_of_this_run(path, architecture)), None)
    then = (f"write {os.path.basename(own)!r}, this run's latest checkpoint, into last_checkpoint" if own else
            ("remove last_checkpoint to train from scratch" if resuming else "name a checkpoint with --ckpt"))
    raise TanError(f"{os.path.join(save_dir, LAST_CHECKPOINT)} names {name}, a checkpoint of another model: it "
                   f"was trained as {other}, and this run's model is {architecture}. A run folder holds the "
                   f"checkpoints of one run: move {name} out of {save_dir}, then {then}")


def _is_of_this_run(path, architecture):
    checkpoint = _read_or_none(path)
    return checkpoint is not None and not _not_of_this_run(path, checkpoint, architecture)


def _refuse_going_back(save_dir, latest, checkpoint, architecture=None):
    """A TanError when a readable training checkpoint was saved later in training than ``latest``, or
    when resuming from ``latest`` would write over a file that is no checkpoint of this run. Returns
    what it says of the later ones that cannot be read, which resuming writes over."""
    progress = recorded_progress(checkpoint) or progress_of_name(os.path.basename(latest))
    if progress is None:
        return []
    unreadable = []  # model_final.pth among them when it cannot be read: the run's end writes it again
    misnamed = _misnamed(latest, checkpoint)
    saved = (f"saved {_progress_text(progress)}, though its name says {_progress_text(misnamed[0])}" if misnamed
             else f"saved {_progress_text(progress)}")
    for named_later, path in training_checkpoints(save_dir, unreadable):
        if _same_file(path, latest):  # compared with the others, never with itself
            continue
        # an earlier file is never written over; model_final.pth is, at the run's end, whatever it records
        if named_later <= progress and os.path.basename(path) != FINAL:
            continue
        try:
            other = read_checkpoint(path, lazily=True)
        except TanError as e:  # nothing in it to lose, but the log says which file goes
            unreadable.append((path, str(e)))
            continue
        name = os.path.basename(path)
        why_not = _not_of_this_run(path, other, architecture)
        if why_not:
            renamed = _misnamed(path, other) if not _another_model(other, architecture) else None
            true_name = (f" (or rename it {name_of_progress(renamed[1])}, the name training gives it)" if renamed
                         else "")
            raise TanError(f"{why_not}; resuming from {os.path.basename(latest)} ({saved}) would write over it "
                           f"when training reaches that point. A run folder holds the checkpoints of one run: "
                           f"move {name} out of {save_dir}{true_name}")
        if named_later <= progress:
            continue
        later = recorded_progress(other) or named_later
        raise TanError(f"{os.path.join(save_dir, LAST_CHECKPOINT)} names {os.path.basename(latest)} ({saved}), but "
                       f"{name}, saved later in training ({_progress_text(later)}), is there and readable: resuming "
                       f"would train those steps again and overwrite it. Write {name!r} into last_checkpoint to "
                       f"resume from it, or move the later checkpoints away to go back")
    return [f"{why}: resuming from {os.path.basename(latest)} writes over it" for path, why in unreadable
            if not _same_file(path, latest)]


def _refuse_misnamed(save_dir, latest, checkpoint):
    """A TanError when the checkpoint to resume from says another point in training than it holds: the
    run would save its next checkpoints under names that no longer say what they hold, over it among them."""
    misnamed = _misnamed(latest, checkpoint)
    if not misnamed:
        return
    named, recorded = misnamed
    name, true_name = os.path.basename(latest), name_of_progress(recorded)
    taken = (f" ({true_name} is there too: keep one of the two)"
             if os.path.exists(os.path.join(save_dir, true_name)) else "")
    raise TanError(f"{os.path.join(save_dir, LAST_CHECKPOINT)} names {name}, whose name says it was saved "
                   f"{_progress_text(named)}, but it holds the state {_progress_text(recorded)} (was it renamed?): "
                   f"resuming from it would save later checkpoints over it. Rename it {true_name}, the name training "
                   f"gives it, and write {true_name!r} into last_checkpoint{taken}")


def default_checkpoint(output_dir, weight="", architecture=None):
    """(checkpoint, warning): the checkpoint the tools use when none is named: the latest in
    ``output_dir`` (what its last_checkpoint file names, model_final.pth once a run has finished, or
    the fallback of :func:`latest_checkpoint`, which ``warning`` then explains), else ``weight``
    (MODEL.WEIGHT), else "". ``architecture``: the config's MODEL.ARCHITECTURE; a checkpoint of
    another model is named as such (:func:`latest_checkpoint`)."""
    path, _, warning = latest_checkpoint(output_dir, read=lambda p: read_checkpoint(p, lazily=True), resuming=False,
                                         architecture=architecture)
    return path or weight or "", warning
