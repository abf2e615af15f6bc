"""Samplers."""
from torch.utils.data import DistributedSampler


class ResumableDistributedSampler(DistributedSampler):
    """A DistributedSampler (shuffled from the seed and the epoch) that can
    start an epoch part-way, so a run resumed mid-epoch skips the batches it
    has already trained on and sees the rest in the same order.

    It knows its loader's ``batch_size`` so that callers resume by (epoch,
    iteration), the units a checkpoint records, rather than by sample counts."""

    def __init__(self, dataset, num_replicas, rank, shuffle, seed, batch_size, keyed_by_epoch=False, order=None):
        """``keyed_by_epoch``: yield (index, epoch) keys, for datasets whose items are
        drawn anew each epoch (tan.data.video_groups.VideoGroups, training windows).
        ``order``: the dataset's indices in the order to visit them when not shuffling
        (default: 0, 1, 2, ...)."""
        super().__init__(dataset, num_replicas=num_replicas, rank=rank, shuffle=shuffle, seed=seed)
        self.batch_size = batch_size
        self.keyed_by_epoch = keyed_by_epoch
        self.order = None if order is None else [int(i) for i in order]
        self.start = 0  # samples of this rank's share of the epoch to skip

    def set_epoch(self, epoch):
        """Start ``epoch`` at its beginning."""
        self.resume(epoch, 0)

    def resume(self, epoch, iteration):
        """Start ``epoch`` after its first ``iteration`` batches of this rank.

        The epoch's order does not depend on where it starts, so the batches
        that follow are those an uninterrupted run would have drawn."""
        super().set_epoch(epoch)
        self.start = iteration * self.batch_size

    def _ordered(self):
        """DistributedSampler's unshuffled split, over ``order``: padded by repeating it (or cut,
        with drop_last) to a multiple of num_replicas, then every num_replicas-th from this rank's."""
        order = list(self.order[:self.total_size])
        while len(order) < self.total_size:
            order += self.order[:self.total_size - len(order)]
        return order[self.rank:self.total_size:self.num_replicas]

    def __iter__(self):
        indices = (self._ordered() if self.order is not None and not self.shuffle else list(super().__iter__()))
        indices = indices[self.start:]
        return iter([(i, self.epoch) for i in indices] if self.keyed_by_epoch else indices)

    def __len__(self):
        return self.num_samples - self.start
