"""Checkpoints: model, optimizer, scheduler and the loop's arguments, plus
the run's config and the package version (docs/checkpoints.md §1).

Files are ``OUTPUT_DIR/model_{epoch}e.pth`` and ``model_final.pth``; the file
``last_checkpoint`` holds the name of the latest one, relative to OUTPUT_DIR.
Every write is atomic, so an interrupted save leaves the previous state.
"""
import os

import torch

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


def load_model_weights(model, state, path):
    """Strict load (after the model's ``adapt_state_dict``) with an error that lists what does not match."""
    state = adapted(model, state)
    check_model_weights(model, state, path, adapt=False)
    model.load_state_dict(state)


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
        def show(items):
            return ", ".join(items[:8]) + (f" (+{len(items) - 8} more)" if len(items) > 8 else "")
        parts = []
        if mismatched:
            parts.append(f"shape mismatch: {show(mismatched)}")
        if missing:
            parts.append(f"missing from the checkpoint: {show(missing)}")
        if unexpected:
            parts.append(f"not in the model: {show(unexpected)}")
        raise TanError(f"checkpoint {path!r} does not fit the configured model ({'; '.join(parts)}); "
                       f"is it from another config?")


# How torch.save's files begin: a zip archive (torch >= 1.6), or a pickle (the legacy format).
_TORCH_MAGICS = (b"PK\x03\x04", b"\x80")


def read_checkpoint(path):
    head = read_named_file(path, f"checkpoint {path!r}", 4)
    if not head.startswith(_TORCH_MAGICS):
        what = "the file is empty" if not head else "it is not a file that torch.save wrote"
        raise TanError(f"checkpoint {path!r} cannot be read: {what}")
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as e:  # noqa: BLE001 - truncated or damaged: torch raises many kinds
        raise TanError(f"checkpoint {path!r} cannot be read: it is truncated or damaged "
                       f"({type(e).__name__}: {e})") from None


def stored_config(checkpoint):
    """The YAML text of the config a checkpoint was saved with, or None (older
    files, the reference's, bare state dicts)."""
    text = checkpoint.get(CONFIG_FIELD) if isinstance(checkpoint, dict) else None
    return text if isinstance(text, str) else None


def stored_extractors(checkpoint):
    """{"features": [record or None per stream], "text_features": record or None} of the training
    data, as a training run stores it; None for checkpoints saved without it."""
    records = checkpoint.get(EXTRACTORS_FIELD) if isinstance(checkpoint, dict) else None
    return records if isinstance(records, dict) else None


def checkpoint_name(path):
    """What a checkpoint's results are filed under: its file name without ``.pth``."""
    name = os.path.basename(path)
    return name[:-len(".pth")] if name.endswith(".pth") else name


def default_checkpoint(output_dir, weight=""):
    """The checkpoint the tools use when none is named: the latest in
    ``output_dir`` (what its last_checkpoint file names; model_final.pth once a
    run has finished), else ``weight`` (MODEL.WEIGHT), else ""."""
    return last_checkpoint(output_dir) or weight or ""


def last_checkpoint(save_dir):
    """Path of the latest checkpoint in ``save_dir`` (what its last_checkpoint file names), or None."""
    marker = os.path.join(save_dir, LAST_CHECKPOINT)
    if not (save_dir and os.path.isfile(marker)):
        return None
    with open(marker) as f:
        name = f.read().strip()
    # Relative names keep a moved output folder resumable; old absolute ones still work.
    return name if os.path.isabs(name) else os.path.join(save_dir, name)


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
        data.update(self.info)
        data.update(arguments)
        path = os.path.join(self.save_dir, f"{name}.pth")
        try:
            atomic_torch_save(data, path)
            # Only once the checkpoint is complete does last_checkpoint point to it.
            atomic_write_text(os.path.join(self.save_dir, LAST_CHECKPOINT), os.path.basename(path))
        except OSError as cause:  # atomic_torch_save unwraps torch's own error on a full disk
            previous = self.last_checkpoint()
            kept = (f"the previous checkpoint {previous} is intact and last_checkpoint still points to it" if previous
                    else "no earlier checkpoint exists")
            raise TanError(f"cannot write checkpoint {path} ({cause.strerror or cause}); {kept}") from None
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

    def _candidates(self):
        """Training checkpoints in save_dir, newest first."""
        names = [n for n in os.listdir(self.save_dir)
                 if n.startswith("model_") and n.endswith(".pth") and n != BEST]  # best: weights only
        return sorted((os.path.join(self.save_dir, n) for n in names), key=os.path.getmtime, reverse=True)

    def _newest_readable(self, latest):
        """(path, checkpoint): ``latest`` if it reads, else the newest checkpoint that does."""
        try:
            return latest, read_checkpoint(latest)
        except TanError as e:
            problem = e
        self.unreadable.append(latest)
        for path in self._candidates():
            if os.path.abspath(path) == os.path.abspath(latest):
                continue
            try:
                checkpoint = read_checkpoint(path)
            except TanError:
                continue
            self.logger.warning("%s; falling back to the newest readable checkpoint, %s", problem, path)
            return path, checkpoint
        raise TanError(f"{problem}, and no other checkpoint in {self.save_dir} can be read; remove "
                       f"{os.path.join(self.save_dir, LAST_CHECKPOINT)} to start from scratch") from None

    def load(self, weight="", use_latest=True):
        """Resume from the latest checkpoint (model, optimizer, scheduler); else
        load ``weight`` (model only); else start fresh. Returns the saved
        loop arguments (empty unless resuming)."""
        latest = self.last_checkpoint() if use_latest else None
        if latest:
            latest, checkpoint = self._newest_readable(latest)
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
            skip = {"model", "optimizer", "scheduler", CONFIG_FIELD, VERSION_FIELD, EXTRACTORS_FIELD, *self.extra,
                    *self.info}
            return {k: v for k, v in checkpoint.items() if k not in skip}
        if weight:
            self.logger.info("loading model weights from %s (MODEL.WEIGHT)", weight)
            checkpoint = read_checkpoint(weight)
            load_model_weights(self.model, model_state_from(checkpoint, weight), weight)
            self.loaded = weight
            return {}
        self.logger.info("no checkpoint in %s and no MODEL.WEIGHT: starting from scratch", self.save_dir)
        return {}


def run_info(cfg, extractors=None):
    """The ``info`` a training run's Checkpointer writes: the merged config, the package version and
    (``extractors``, when known) how the training features were made."""
    info = {CONFIG_FIELD: cfg.dump(), VERSION_FIELD: __version__}
    if extractors is not None:
        info[EXTRACTORS_FIELD] = extractors
    return info
