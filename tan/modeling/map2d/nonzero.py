"""A tensor kept for a backward as its non-zero elements and one bit per
element saying where they are: a ReLU's output, about half of which is zero,
in about half its bytes (docs/model.md §5.4)."""
import torch
from torch.nn import functional as F


def keep_nonzero(x):
    """A tensor -> (its non-zero elements in row-major order [K]; where they are, one bit per
    element, little end first, [ceil(numel / 8)] uint8). A NaN is kept as a value; a
    negative zero comes back as zero (:func:`restore_nonzero`), which no product or ReLU
    mask tells apart from it. Reading the number of values waits for the device."""
    flat = x.reshape(-1)
    where = flat != 0
    values = flat[where]
    groups = F.pad(where.to(torch.uint8), (0, -where.numel() % 8)).view(-1, 8)
    bits = (groups << _places(x.device)).sum(1, dtype=torch.uint8)  # the bits are disjoint: a sum is an or
    return values, bits


def nonzero_places(bits, shape, zero=False):
    """Where :func:`keep_nonzero`'s ``bits`` say a ``shape`` tensor was not zero (with ``zero``,
    where it was): bool, ``shape``."""
    numel = torch.Size(shape).numel()
    places = (bits[:, None] >> _places(bits.device)).bitwise_and_(1)
    if zero:
        places.bitwise_xor_(1)
    return places.view(-1)[:numel].view(torch.bool).view(shape)


def restore_nonzero(values, bits, shape):
    """The ``shape`` tensor that :func:`keep_nonzero` kept as (``values``, ``bits``)."""
    return values.new_zeros(shape).masked_scatter_(nonzero_places(bits, shape), values)


def _places(device):
    # made on the device: a copy from the host would wait for it
    return torch.arange(8, dtype=torch.uint8, device=device)
