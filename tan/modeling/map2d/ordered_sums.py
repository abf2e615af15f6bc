"""Gradient sums whose order of additions is fixed, on every device (docs/training.md,
"Repeatability on a CPU").

The gradient of an indexing with repeated indices adds several terms into one element;
autograd sums them with ``index_put_(..., accumulate=True)``. On CUDA that sorts the
indices and adds in order; on the CPU, from 32768 float32 terms and with several threads,
it adds with atomic additions from all the threads at once, in the order in which they get
there, which a busy machine changes from run to run. ``scatter_add_`` and ``index_add_``
are the other way round: on the CPU each sum is added in a fixed order (a row by one
thread, or one index after the other), on CUDA with atomics. The functions here take, on
each device, the kernel that adds in order; in float32 both give the bits of the sum done
in index order, as one CPU thread does it."""
import torch


def accumulate(target, dim, index, values):
    """``target`` with ``values`` added at ``index`` (1-D) along ``dim`` (0 or the last), in
    place: ``target[..., index[k]] += values[..., k]`` (``dim`` last; ``target[index[k]] +=
    values[k]`` for 0), the terms of one element added in the order of ``index``."""
    last = dim in (-1, target.dim() - 1)
    if target.device.type == "cpu":
        if last:
            return target.scatter_add_(-1, index.expand(*values.shape[:-1], -1), values)
        return target.index_add_(0, index, values)
    where = [None] * (target.dim() - 1) + [index] if last else [index]
    return torch.ops.aten.index_put_(target, where, values, True)


def take_rows(x, index):
    """``x[index]`` for a 1-D ``index``: the rows of ``x`` it names, whose gradient sums the
    terms of a repeated row in a fixed order on every device (index_select's backward is
    index_add_ on the CPU; on CUDA, the indexing's is the sorted index_put_)."""
    return x.index_select(0, index) if x.device.type == "cpu" else x[index]
