"""Saving and loading a run's checkpoints: model, optimizer, scheduler and the loop's arguments, plus
the run's config and the package version (docs/checkpoints.md §1).

Every write is atomic, so an interrupted save leaves the previous state; last_checkpoint names a
checkpoint only once it is complete.
"""
import os

from ...errors import TanError
from ...utils.checkpoint_file import (CONFIG_FIELD, EXTRACTORS_FIELD, HEAD_PREFIX, LAST_CHECKPOINT, MARKER_FIELD,
                                      TRAINED_SPAN_FIELD, VERSION_FIELD, load_model_weights, model_state_from,
                                      read_checkpoint, stored_architecture)
from ...utils.io import atomic_torch_save, atomic_write_text
from ...utils.logger import get_logger
from ...version import __version__
from .inventory import _same_file
from .marker import last_checkpoint, marked_file, marker_stamp
from .resume import latest_checkpoint


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
