"""Checkpoints: model, optimizer, scheduler and the loop's arguments, plus
the run's config and the package version (docs/checkpoints.md §1).

Files are ``OUTPUT_DIR/model_{epoch}e.pth`` and ``model_final.pth``; the file
``last_checkpoint`` holds the name of the latest one, relative to OUTPUT_DIR.
Every write is atomic, so an interrupted save leaves the previous state.
"""
import os
import re

import torch
import yaml

from ..errors import TanError
from .io import atomic_torch_save, atomic_write_text, read_named_file
from ..version import __version__
from .logger import get_logger

LAST_CHECKPOINT = "last_checkpoint"
FINAL = "model_final.pth"
BEST = "model_best.pth"
# What every file a run saves carries besides weights and training state, so
# that a checkpoint alone can be evaluated or used for prediction.
CONFIG_FIELD = "config"  # the merged config, as the YAML text of config.yml
VERSION_FIELD = "tan_version"
EXTRACTORS_FIELD = "extractors"  # how the training features were made (tan/data/features/provenance.py)
TRAINED_SPAN_FIELD = "trained_span"  # what the training videos last (tan.data.RunData.trained_span)
# What last_checkpoint was when a training checkpoint was saved (:func:`marker_stamp`): a save cut short
# between its file's rename and the marker's update is told from a marker set back by hand by it.
MARKER_FIELD = "last_checkpoint_before"


def _strip_prefix(state_dict, prefix="module."):
    if state_dict and all(k.startswith(prefix) for k in state_dict):
        return {k[len(prefix):]: v for k, v in state_dict.items()}
    return state_dict


def model_state_from(checkpoint, path):
    """The model's state dict from a training checkpoint or a bare state dict."""
    if isinstance(checkpoint, dict) and isinstance(checkpoint.get("model"), dict):
        state = checkpoint["model"]
    elif isinstance(checkpoint, dict) and checkpoint and all(torch.is_tensor(v) for v in checkpoint.values()):
        state = checkpoint
    else:
        raise TanError(f"checkpoint {path!r} holds neither a 'model' state dict nor a bare state dict")
    return _strip_prefix(state)


def adapted(model, state):
    """``state`` as ``model`` names its weights: a model maps a foreign checkpoint's names
    onto its own in ``adapt_state_dict`` (the identity for its own checkpoints)."""
    adapt = getattr(model, "adapt_state_dict", None)
    return adapt(state) if adapt is not None else state


# The window relevance head (tan/modeling/relevance.py), the submodule ``relevance`` of any model: a
# model trained without one can take one on, started fresh, through MODEL.WEIGHT.
HEAD_PREFIX = "relevance."


def load_model_weights(model, state, path, start_fresh=()):
    """Strict load (after the model's ``adapt_state_dict``) with an error that lists what does not match.
    ``start_fresh``: prefixes of parts of the model that ``state`` may lack as a whole (none of their
    weights there): those keep the model's own initial weights. Returns the names kept so."""
    state = adapted(model, state)
    own = model.state_dict()
    fresh = []
    for prefix in start_fresh:
        part = [name for name in own if name.startswith(prefix)]
        if part and not any(name in state for name in part):
            fresh += part
    if fresh:
        state = {**state, **{name: own[name] for name in fresh}}
    check_model_weights(model, state, path, adapt=False)
    model.load_state_dict(state)
    return fresh


def check_model_weights(model, state, path, adapt=True):
    """An error that lists the names and shapes that differ when ``state`` does not fit ``model``."""
    if adapt:
        state = adapted(model, state)
    own = model.state_dict()
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    mismatched = [f"{k}: checkpoint {list(state[k].shape)} vs model {list(own[k].shape)}"
                  for k in own if k in state and state[k].shape != own[k].shape]
    if missing or unexpected or mismatched:
        # Weights that do not fit are most often another model's: say so rather than list its names.
        other, this_model = _architecture_of_file(path), _model_name(model)
        if other and this_model and other != this_model:
            raise TanError(f"checkpoint {path!r} is a checkpoint of another model: {other} (the MODEL.ARCHITECTURE it "
                           f"was trained with), where this config's model is {this_model}; give a checkpoint of "
                           f"{this_model}, or a config whose MODEL.ARCHITECTURE is {other}")

        def show(items):
            return ", ".join(items[:8]) + (f" (+{len(items) - 8} more)" if len(items) > 8 else "")
        parts = []
        if mismatched:
            parts.append(f"shape mismatch: {show(mismatched)}")
        if missing:
            parts.append(f"missing from the checkpoint: {show(missing)}")
        if unexpected:
            parts.append(f"not in the model: {show(unexpected)}")
        head = {name.split(".", 1)[0] + "." for name in (*missing, *unexpected)} == {HEAD_PREFIX}
        raise TanError(f"checkpoint {path!r} does not fit the configured model ({'; '.join(parts)}); "
                       + (f"the window relevance head is in the {'model' if missing else 'checkpoint'} only: set "
                          f"MODEL.RELEVANCE.ENABLED {not missing}, as the checkpoint was trained (its stored config "
                          f"says so)" if head else "is it from another config?"))


def _model_name(model):
    """The MODEL.ARCHITECTURE a model was registered under (tan.config.models.register_model), or None."""
    return getattr(model, "NAME", None) or getattr(getattr(model, "module", None), "NAME", None)


# How torch.save's files begin: a zip archive (torch >= 1.6), or a pickle (the legacy format).
_TORCH_MAGICS = (b"PK\x03\x04", b"\x80")


def read_checkpoint(path, lazily=False):
    """The checkpoint dict of ``path``; TanError when it is not a file torch.save wrote, or a
    truncated one. ``lazily``: map its tensors instead of reading them (torch's zip format; a
    legacy pickle is read whole): enough to see its recorded fields and that it is complete."""
    head = read_named_file(path, f"checkpoint {path!r}", 4)
    if not head.startswith(_TORCH_MAGICS):
        what = "the file is empty" if not head else "it is not a file that torch.save wrote"
        raise TanError(f"checkpoint {path!r} cannot be read: {what}")
    try:
        return torch.load(path, map_location="cpu", weights_only=False, mmap=lazily and head == _TORCH_MAGICS[0])
    except Exception as e:  # noqa: BLE001 - truncated or damaged: torch raises many kinds
        # torch's first sentence says what failed; the rest is advice a user of tan cannot act on
        detail = (str(e).strip().splitlines() or [""])[0].split(". ", 1)[0]
        raise TanError(f"checkpoint {path!r} cannot be read: it is truncated or damaged "
                       f"({type(e).__name__}: {detail})") from None


def stored_config(checkpoint):
    """The YAML text of the config a checkpoint was saved with, or None (older
    files, the reference's, bare state dicts)."""
    text = checkpoint.get(CONFIG_FIELD) if isinstance(checkpoint, dict) else None
    return text if isinstance(text, str) else None


def stored_architecture(checkpoint):
    """MODEL.ARCHITECTURE of the config a checkpoint (or a Checkpointer's ``info``) was saved with: the
    model it holds; None where it carries no config."""
    text = stored_config(checkpoint)
    if text is None:
        return None
    try:
        config = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return None
    model = config.get("MODEL") if isinstance(config, dict) else None
    name = model.get("ARCHITECTURE") if isinstance(model, dict) else None
    return name if isinstance(name, str) and name else None


def _architecture_of_file(path):
    """The model a checkpoint file records (:func:`stored_architecture`), None when unknown or unreadable."""
    if not (isinstance(path, str) and os.path.isfile(path)):
        return None
    try:
        return stored_architecture(read_checkpoint(path, lazily=True))
    except TanError:
        return None


def stored_extractors(checkpoint):
    """{"features": [record or None per stream], "text_features": record or None} of the training
    data, as a training run stores it; None for checkpoints saved without it."""
    records = checkpoint.get(EXTRACTORS_FIELD) if isinstance(checkpoint, dict) else None
    return records if isinstance(records, dict) else None


def stored_trained_span(checkpoint):
    """{"median": s, "longest": s, "videos": n}: the seconds of the training videos as the model
    took them, as a training run stores it; None for checkpoints saved without it."""
    span = checkpoint.get(TRAINED_SPAN_FIELD) if isinstance(checkpoint, dict) else None
    return span if isinstance(span, dict) else None


def checkpoint_name(path):
    """What a checkpoint's results are filed under: its file name without ``.pth``."""
    name = os.path.basename(path)
    return name[:-len(".pth")] if name.endswith(".pth") else name


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


def last_checkpoint_file(save_dir):
    """(path, problem): the checkpoint that ``save_dir``/last_checkpoint names (or the complete one
    whose save was cut short before the marker could name it, :func:`unmarked_save`), or, when that file
    cannot name one (not UTF-8, empty, naming a missing file or a folder), None and what is wrong
    with it; (None, None) where there is no last_checkpoint."""
    path, problem = marked_file(save_dir)
    if path is not None:
        cut = unmarked_save(save_dir, path)
        if cut is not None:
            return cut, None
    return path, problem


def marked_file(save_dir):
    """(path, problem) of what ``save_dir``/last_checkpoint names, as :func:`last_checkpoint_file` says
    it, without looking past it for a later save."""
    marker = os.path.join(save_dir, LAST_CHECKPOINT) if save_dir else ""
    if not (marker and os.path.lexists(marker)):
        return None, None
    if os.path.isdir(marker):
        return None, f"{marker} is a folder, not the file that names the latest checkpoint"
    try:
        with open(marker, "rb") as f:
            data = f.read(4096)
    except OSError as e:
        return None, f"{marker} cannot be read ({e.strerror or e})"
    try:
        name = data.decode("utf-8").strip()
    except UnicodeDecodeError as e:
        return None, (f"{marker} is not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); it should hold "
                      f"the file name of the latest checkpoint")
    if not name:
        return None, f"{marker} is empty; it should hold the file name of the latest checkpoint"
    # Relative names keep a moved output folder resumable; old absolute ones still work.
    path = name if os.path.isabs(name) else os.path.join(save_dir, name)
    if not os.path.isfile(path):
        what = "a folder" if os.path.isdir(path) else "not there"
        return None, f"{marker} names {name!r}, which is {what}"
    return path, None


def last_checkpoint(save_dir):
    """Path of the latest checkpoint in ``save_dir`` (what its last_checkpoint file names), or None
    (no last_checkpoint, or one that names no file: :func:`latest_checkpoint` says why and falls back)."""
    return last_checkpoint_file(save_dir)[0]


def marker_stamp(save_dir):
    """What ``save_dir``/last_checkpoint is now: {"text", "size", "mtime_ns"}, None where there is none or
    it cannot be read. Every training checkpoint records it as it is saved (MARKER_FIELD)."""
    try:
        with open(os.path.join(save_dir, LAST_CHECKPOINT), "rb") as f:
            stat = os.fstat(f.fileno())
            data = f.read(4096)
    except OSError:
        return None
    # the inode and the change time too: a copy of an old marker put back with its times kept (cp -p) is
    # a new file, with a change time no one can set back
    return {"text": data.decode("utf-8", "replace"), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns,
            "inode": stat.st_ino, "ctime_ns": stat.st_ctime_ns}


def unmarked_save(save_dir, marked):
    """The complete training checkpoint whose save was cut short before last_checkpoint could name it;
    None where there is none.

    A save renames its checkpoint into place, then writes last_checkpoint: a kill between the two
    leaves the marker naming ``marked``, the checkpoint before. The later one is taken when it is the
    latest in training and records that last_checkpoint was exactly as it is now (its text and
    modification time) when it was saved, so that nothing has written the marker since. A marker set
    back by hand to an earlier checkpoint does not match: :func:`latest_checkpoint` refuses it."""
    # model_final.pth says its point in training in its fields: a finished run continued to more epochs
    marked_progress = progress_of_name(os.path.basename(marked)) or recorded_progress(_read_or_none(marked))
    if marked_progress is None or not _named_later(save_dir, marked_progress):
        return None  # cheap, from the names alone: most often nothing was saved after the marked file
    found = training_checkpoints(save_dir)
    progress, path = found[0] if found else (None, None)
    if path is None or _same_file(path, marked):
        return None
    if progress < marked_progress or (progress == marked_progress and os.path.basename(path) != FINAL):
        return None
    checkpoint = _read_or_none(path)
    recorded = checkpoint.get(MARKER_FIELD) if isinstance(checkpoint, dict) else None
    if not recorded or recorded != marker_stamp(save_dir) or _misnamed(path, checkpoint):
        return None
    return path


def _named_later(save_dir, progress):
    """Whether ``save_dir`` holds a checkpoint whose name says it is later than ``progress``, or a
    model_final.pth (which only its fields place)."""
    for name in os.listdir(save_dir):
        named = progress_of_name(name)
        if name == FINAL or (named is not None and named > progress):
            return True
    return False


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


def name_of_progress(progress):
    """The file name training gives the checkpoint of ``progress`` (epoch, steps of it done)."""
    epoch, steps = progress
    return f"model_{epoch}e_{steps}it.pth" if steps else f"model_{epoch - 1}e.pth"


def _misnamed(path, checkpoint):
    """(the progress its name says, the progress it records) of a training checkpoint whose name says
    another point in training than it holds (a file renamed or copied over another); else None."""
    named, recorded = progress_of_name(os.path.basename(path)), recorded_progress(checkpoint)
    return (named, recorded) if named and recorded and named != recorded else None


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


def _same_file(a, b):
    return a is not None and b is not None and os.path.abspath(a) == os.path.abspath(b)


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


def _read_or_none(path):
    """The checkpoint at ``path`` read lazily, None when it cannot be read."""
    try:
        return read_checkpoint(path, lazily=True)
    except TanError:
        return None


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


def _progress_text(progress):
    epoch, steps = progress
    return f"in epoch {epoch} after {steps} steps" if steps else f"after epoch {epoch - 1}"


def default_checkpoint(output_dir, weight="", architecture=None):
    """(checkpoint, warning): the checkpoint the tools use when none is named: the latest in
    ``output_dir`` (what its last_checkpoint file names, model_final.pth once a run has finished, or
    the fallback of :func:`latest_checkpoint`, which ``warning`` then explains), else ``weight``
    (MODEL.WEIGHT), else "". ``architecture``: the config's MODEL.ARCHITECTURE; a checkpoint of
    another model is named as such (:func:`latest_checkpoint`)."""
    path, _, warning = latest_checkpoint(output_dir, read=lambda p: read_checkpoint(p, lazily=True), resuming=False,
                                         architecture=architecture)
    return path or weight or "", warning


class Checkpointer:
    def __init__(self, model, optimizer=None, scheduler=None, save_dir="", save_to_disk=True, extra=None,
                 info=None):
        """``extra``: more {name: object with state_dict()} saved and restored with the
        optimizer (the fp16 gradient scaler). ``info``: plain fields written into
        every file saved (the config and version, :func:`run_info`), never
        returned by :meth:`load` as loop arguments."""
        self.extra = dict(extra or {})
        self.info = dict(info or {})
        self.model = model.module if hasattr(model, "module") else model
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.save_dir = save_dir
        self.save_to_disk = save_to_disk
        self.loaded = None  # the file load() resumed from or loaded weights from, once it has
        self.unreadable = []  # the checkpoints load() could not read and passed over for an older one
        self.logger = get_logger("checkpoint")

    def save(self, name, **arguments):
        if not (self.save_dir and self.save_to_disk):
            return
        data = {"model": self.model.state_dict()}
        if self.optimizer is not None:
            data["optimizer"] = self.optimizer.state_dict()
        if self.scheduler is not None:
            data["scheduler"] = self.scheduler.state_dict()
        for key, obj in self.extra.items():
            data[key] = obj.state_dict()
        data[MARKER_FIELD] = marker_stamp(self.save_dir)
        data.update(self.info)
        data.update(arguments)
        path = os.path.join(self.save_dir, f"{name}.pth")
        try:
            atomic_torch_save(data, path)
        except OSError as cause:  # atomic_torch_save unwraps torch's own error on a full disk
            previous = marked_file(self.save_dir)[0]
            kept = (f"the previous checkpoint {previous} is intact and last_checkpoint still points to it" if previous
                    else "no earlier checkpoint exists")
            raise TanError(f"cannot write checkpoint {path} ({cause.strerror or cause}); {kept}") from None
        try:  # only once the checkpoint is complete does last_checkpoint point to it
            atomic_write_text(os.path.join(self.save_dir, LAST_CHECKPOINT), os.path.basename(path))
        except OSError as cause:
            then = ("the same command resumes from it" if data[MARKER_FIELD] else
                    "with no last_checkpoint yet, the same command trains from the start again")
            raise TanError(f"saved checkpoint {path}, but cannot write {os.path.join(self.save_dir, LAST_CHECKPOINT)} "
                           f"to name it ({cause.strerror or cause}); the checkpoint is whole: {then}") from None
        self.logger.info("saved checkpoint %s", path)

    def save_weights(self, name, **info):
        """Model weights and ``info`` only (no optimizer, last_checkpoint untouched): model_best.pth."""
        if not (self.save_dir and self.save_to_disk):
            return
        path = os.path.join(self.save_dir, f"{name}.pth")
        try:
            atomic_torch_save({"model": self.model.state_dict(), **self.info, **info}, path)
        except OSError as cause:
            raise TanError(f"cannot write {path} ({cause.strerror or cause}); the previous version, if any, "
                           f"is intact") from None
        self.logger.info("saved %s", path)

    def last_checkpoint(self):
        """Path of the latest checkpoint in save_dir, or None."""
        return last_checkpoint(self.save_dir)

    def load(self, weight="", use_latest=True):
        """Resume from the latest checkpoint (model, optimizer, scheduler); else
        load ``weight`` (model only); else start fresh. Returns the saved
        loop arguments (empty unless resuming)."""
        latest, checkpoint, warning = (latest_checkpoint(self.save_dir, architecture=stored_architecture(self.info))
                                       if use_latest else (None, None, None))
        if latest:
            if warning:
                self.logger.warning("%s", warning)
            named, marked = last_checkpoint(self.save_dir), marked_file(self.save_dir)[0]
            if not _same_file(named, latest):  # fallen back: what last_checkpoint names could not be read
                self.unreadable.append(named or os.path.join(self.save_dir, LAST_CHECKPOINT))
            # a marker that names nothing, or lags a save cut short: it names the resume point now
            cut_short = _same_file(named, latest) and not _same_file(marked, latest)
            if (named is None or cut_short) and self.save_to_disk:
                atomic_write_text(os.path.join(self.save_dir, LAST_CHECKPOINT), os.path.basename(latest))
                self.logger.info("%s now names %s", os.path.join(self.save_dir, LAST_CHECKPOINT),
                                 os.path.basename(latest))
            self.loaded = latest
            self.logger.info("resuming from %s", latest)
            load_model_weights(self.model, model_state_from(checkpoint, latest), latest)
            if self.optimizer is not None and "optimizer" in checkpoint:
                self.optimizer.load_state_dict(checkpoint["optimizer"])
            if self.scheduler is not None and "scheduler" in checkpoint:
                self.scheduler.load_state_dict(checkpoint["scheduler"])
            for key, obj in self.extra.items():
                if key in checkpoint:
                    obj.load_state_dict(checkpoint[key])
            skip = {"model", "optimizer", "scheduler", CONFIG_FIELD, VERSION_FIELD, EXTRACTORS_FIELD, MARKER_FIELD,
                    *self.extra, *self.info}
            return {k: v for k, v in checkpoint.items() if k not in skip}
        if weight:
            self.logger.info("loading model weights from %s (MODEL.WEIGHT)", weight)
            checkpoint = read_checkpoint(weight)
            fresh = load_model_weights(self.model, model_state_from(checkpoint, weight), weight,
                                       start_fresh=(HEAD_PREFIX,))
            if fresh:
                self.logger.warning("%s holds no window relevance head (MODEL.RELEVANCE.ENABLED): the model's weights "
                                    "are loaded from it, and the head starts fresh (%d tensors)", weight, len(fresh))
            self.loaded = weight
            return {}
        self.logger.info("no checkpoint in %s and no MODEL.WEIGHT: starting from scratch", self.save_dir)
        return {}


def run_info(cfg, extractors=None, trained_span=None):
    """The ``info`` a training run's Checkpointer writes: the merged config, the package version,
    (``extractors``, when known) how the training features were made and (``trained_span``) what
    the training videos last."""
    info = {CONFIG_FIELD: cfg.dump(), VERSION_FIELD: __version__}
    if extractors is not None:
        info[EXTRACTORS_FIELD] = extractors
    if trained_span is not None:
        info[TRAINED_SPAN_FIELD] = trained_span
    return info
