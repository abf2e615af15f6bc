"""Distributed helpers that also work in a single process and on CPU: joining
the process group, rank and world size, barriers, gathers and reductions."""
import datetime
import os

import torch
import torch.distributed as dist


def init_distributed(local_rank, use_cuda, timeout_seconds):
    """Join the process group that torchrun (or a legacy launcher) describes in
    the environment. Returns False (and does nothing) in a single process."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return False
    if use_cuda:
        torch.cuda.set_device(local_rank)
    if not dist.is_initialized():
        # NCCL moves CUDA tensors; gloo serves CPU runs. A collective waits at
        # most ``timeout_seconds`` for a peer, so a dead or hung one ends the run.
        backend = "nccl" if use_cuda else "gloo"
        timeout = datetime.timedelta(seconds=timeout_seconds)
        store = _restart_store(timeout)
        if store is None:
            dist.init_process_group(backend, init_method="env://", timeout=timeout)
        else:
            dist.init_process_group(backend, store=store, rank=int(os.environ["RANK"]), world_size=world_size,
                                    timeout=timeout)
    return True


def _restart_store(timeout):
    """After a torchrun restart, the agent's store still holds the previous
    attempt's connection keys, and gloo then waits for peers that are gone.
    Keys of each attempt go under their own prefix instead. None: use env://."""
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    if attempt == 0 or os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return None
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), int(os.environ["WORLD_SIZE"]),
                          is_master=False, timeout=timeout)
    return dist.PrefixStore(f"tan/attempt_{attempt}", store)


def shutdown(together=False):
    """Leave the process group, if one was joined.

    ``together`` (a run that ended normally on every rank): first wait for the
    others, so that no process tears its connections down while a peer is still
    finishing its last collective or save; a gloo worker torn down under a peer's
    feet can abort the process, and torchrun then reports the run as failed."""
    if dist.is_available() and dist.is_initialized():
        if together:
            try:
                dist.barrier()
            except RuntimeError:  # a peer is gone after all: leave anyway
                pass
        dist.destroy_process_group()


def is_communication_failure(error):
    """A failed or timed-out collective: DistError (torch >= 2.1), or the
    RuntimeError that gloo raises when a peer does not answer."""
    if not is_dist():
        return False
    dist_error = getattr(dist, "DistError", ())
    text = str(error)
    return isinstance(error, dist_error) or any(
        marker in text for marker in ("Timed out", "timed out", "Connection closed by peer", "Connection reset"))


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


def reduce_max_int(value):
    """Largest of a Python int over ranks (every rank must call it at the same point)."""
    if get_world_size() == 1:
        return int(value)
    t = torch.tensor([int(value)], device=comm_device())
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t.item())


__all__ = ["init_distributed", "shutdown", "is_communication_failure", "is_dist", "get_world_size", "get_rank",
           "is_main_process", "synchronize", "all_gather", "reduce_mean", "reduce_max_int", "comm_device"]
