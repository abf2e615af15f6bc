"""Where a training run stands, saved in every checkpoint and restored as a whole.

On disk the fields are flat keys of the checkpoint dict, next to "model",
"optimizer" and "scheduler" (docs/checkpoints.md §2); checkpoints written
before this class existed use the same keys and load unchanged.
"""
from dataclasses import dataclass
from typing import Optional

from ..utils.rng import capture_rng_state, restore_rng_state

_FIELDS = ("epoch", "iteration", "iter_in_epoch", "best", "rng", "records", "hooks", "epoch_hooks_done")


@dataclass
class TrainingState:
    epoch: int = 1  # the epoch in progress, or the next one to train (epochs count from 1)
    iteration: int = 0  # optimisation steps done in the whole run
    iter_in_epoch: int = 0  # steps of ``epoch`` already done (non-zero only mid-epoch)
    best: Optional[dict] = None  # best validation result so far: metric, value, epoch, dataset
    rng: Optional[dict] = None  # random states to restore before the next step (after a resume)
    # What the run had recorded when the checkpoint was saved: {record file: lines}
    # (tan/engine/records.py); None in a checkpoint saved before records were counted.
    records: Optional[dict] = None
    hooks: Optional[dict] = None  # the hooks' own state_dict()s, by hook name
    # At the end of an epoch: whether the hooks' after_epoch (validation included) had run when the
    # checkpoint was saved. The epoch's checkpoint is saved before them, so a run resumed from it
    # runs them again; a stop on a signal after them saves it again with this set.
    epoch_hooks_done: bool = False

    @classmethod
    def from_checkpoint(cls, fields):
        """The state saved with a training checkpoint (``{}``: a fresh run)."""
        return cls(**{k: fields[k] for k in _FIELDS if fields.get(k) is not None})

    def checkpoint_fields(self, records=None, hooks=None, epoch_hooks_done=False):
        """The flat checkpoint keys, with the random states as they are now, what the run has
        ``records``-ed ({file: lines}), the ``hooks``' states and (at an epoch's end) whether its
        hooks have run."""
        fields = {"epoch": self.epoch, "iteration": self.iteration}
        if self.iter_in_epoch:
            fields["iter_in_epoch"] = self.iter_in_epoch
        elif epoch_hooks_done:
            fields["epoch_hooks_done"] = True
        if self.best is not None:
            fields["best"] = self.best
        if records is not None:
            fields["records"] = records
        if hooks:
            fields["hooks"] = hooks
        fields["rng"] = capture_rng_state()
        return fields

    @property
    def epoch_to_close(self):
        """The epoch whose hooks (after_epoch: validation, the user's hooks) a run resumed from this
        state runs again before it trains on, or None: an epoch's end saved before its hooks ran."""
        if self.iteration and not self.iter_in_epoch and not self.epoch_hooks_done:
            return self.epoch - 1
        return None

    def checkpoint_name(self):
        """model_{epoch}e_{it}it mid-epoch, model_{epoch}e once an epoch is done."""
        if self.iter_in_epoch:
            return f"model_{self.epoch}e_{self.iter_in_epoch}it"
        return f"model_{self.epoch - 1}e"

    def restore_rng(self):
        """Continue the random streams of the interrupted run, so a resume is exact."""
        if self.rng is not None:
            restore_rng_state(self.rng)
            self.rng = None

    def step_done(self):
        self.iteration += 1
        self.iter_in_epoch += 1

    def epoch_done(self):
        self.epoch += 1
        self.iter_in_epoch = 0
