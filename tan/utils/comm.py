"""Distributed helpers that also work in a single process and on CPU."""
import torch
import torch.distributed as dist


def is_dist():
    return dist.is_available() and dist.is_initialized()


def get_world_size():
    return dist.get_world_size() if is_dist() else 1


def get_rank():
    return dist.get_rank() if is_dist() else 0


def is_main_process():
    return get_rank() == 0


def synchronize():
    if is_dist() and get_world_size() > 1:
        dist.barrier()


def comm_device():
    # NCCL only moves CUDA tensors; gloo moves CPU tensors.
    if is_dist() and dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def all_gather(obj):
    """Gather any picklable object from every rank; returns a list by rank."""
    if get_world_size() == 1:
        return [obj]
    out = [None] * get_world_size()
    dist.all_gather_object(out, obj)
    return out


def reduce_mean(value):
    """Mean of a Python float over ranks (for logging)."""
    if get_world_size() == 1:
        return float(value)
    t = torch.tensor([float(value)], dtype=torch.float64, device=comm_device())
    dist.all_reduce(t)
    return t.item() / get_world_size()


__all__ = ["is_dist", "get_world_size", "get_rank", "is_main_process", "synchronize",
           "all_gather", "reduce_mean", "comm_device"]
