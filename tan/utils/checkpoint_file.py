"""What a checkpoint file is and how it is read: the file names a run saves under, the fields every
file carries besides weights and training state (the run's config and the package version, so that a
checkpoint alone can be evaluated or used for prediction; docs/checkpoints.md §1), a model's weights
taken from one and checked against the model, and what a file records (its config, model, extractors
and trained span).

Which checkpoints a run saves, how the latest is named and which one a run resumes from is the run's
checkpoint policy: tan.engine.checkpoints.
"""
import os

import torch
import yaml

from ..errors import TanError
from .io import read_named_file

LAST_CHECKPOINT = "last_checkpoint"
FINAL = "model_final.pth"
BEST = "model_best.pth"
# What every file a run saves carries besides weights and training state, so
# that a checkpoint alone can be evaluated or used for prediction.
CONFIG_FIELD = "config"  # the merged config, as the YAML text of config.yml
VERSION_FIELD = "tan_version"
EXTRACTORS_FIELD = "extractors"  # how the training features were made (tan/data/features/provenance.py)
TRAINED_SPAN_FIELD = "trained_span"  # what the training videos last (tan.data.RunData.trained_span)
# What last_checkpoint was when a training checkpoint was saved (tan.engine.checkpoints.marker_stamp): a save
# cut short between its file's rename and the marker's update is told from a marker set back by hand by it.
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
