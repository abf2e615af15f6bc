"""Samplers."""
import torch
from torch.utils.data import DistributedSampler

# Epoch e of SEED s is shuffled by torch's generator seeded with s * ORDER_STRIDE + e
# (torch keeps the low 32 bits), so each SEED draws its epochs' orders from a stretch of
# generator seeds of its own. DistributedSampler's s + e gives SEED 2's first epoch the
# order of SEED 1's second: a sweep over consecutive seeds would train on shifted copies of
# the same few orders and show less of the spread that training over seeds has, and two
# datasets of one size would share them. SEED 0 keeps DistributedSampler's orders.
# Odd, and for every pair of seeds fewer than 100,000 apart their stretches start at least
# 11,000 generator seeds apart: no two runs of fewer epochs share an order.
ORDER_STRIDE = 2654435761


def epoch_order_seed(seed, epoch):
    """The generator seed of epoch ``epoch``'s order under config SEED ``seed``."""
    return (int(seed) * ORDER_STRIDE + int(epoch)) % 2 ** 32


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

    def _split(self, order):
        """DistributedSampler's split of ``order``: padded by repeating it (or cut, with
        drop_last) to a multiple of num_replicas, then every num_replicas-th from this rank's."""
        kept = list(order[:self.total_size])
        while len(kept) < self.total_size:
            kept += order[:self.total_size - len(kept)]
        return kept[self.rank:self.total_size:self.num_replicas]

    def _shuffled(self):
        generator = torch.Generator()
        generator.manual_seed(epoch_order_seed(self.seed, self.epoch))
        return self._split(torch.randperm(len(self.dataset), generator=generator).tolist())

    def __iter__(self):
        if self.shuffle:
            indices = self._shuffled()
        else:
            indices = self._split(self.order if self.order is not None else list(range(len(self.dataset))))
        indices = indices[self.start:]
        return iter([(i, self.epoch) for i in indices] if self.keyed_by_epoch else indices)

    def __len__(self):
        return self.num_samples - self.start
