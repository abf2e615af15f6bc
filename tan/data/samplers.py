"""Samplers."""
from torch.utils.data import DistributedSampler


class ResumableDistributedSampler(DistributedSampler):
    """A DistributedSampler (shuffled from the seed and the epoch) that can
    start an epoch part-way, so a run resumed mid-epoch skips the batches it
    has already trained on and sees the rest in the same order."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.start = 0

    def set_epoch(self, epoch, start=0):
        """``start``: samples of this rank's share of the epoch already seen."""
        super().set_epoch(epoch)
        self.start = start

    def __iter__(self):
        return iter(list(super().__iter__())[self.start:])

    def __len__(self):
        return self.num_samples - self.start
