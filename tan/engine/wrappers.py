"""The model as the run uses it: memory format, DistributedDataParallel,
torch.compile, and the way back to the plain module inside those wrappers."""
import hashlib
import warnings

import torch



def prepare_model(cfg, model):
    """Memory format for the 2D convolutions (model already on its device)."""
    if cfg.MODEL.CHANNELS_LAST:
        model.to(memory_format=torch.channels_last)
    return model


def wrap_distributed(model, device, distributed):
    """DistributedDataParallel around the model when running under several processes."""
    if not distributed:
        return model
    ids = [device.index] if device.type == "cuda" else None
    with warnings.catch_warnings():  # newer torch deprecates the name; the behaviour is the one we want
        warnings.filterwarnings("ignore", message=".*broadcast_buffers.*", category=FutureWarning)
        # Masks and weight maps are derived buffers, identical on every rank: no need to broadcast them.
        # (Batch-norm statistics stay per process, as in the reference trainings.)
        # A frozen encoder (a pretrained text encoder in its first epochs) gets no gradient: DDP must look for such
        # parameters.
        return torch.nn.parallel.DistributedDataParallel(model, device_ids=ids, broadcast_buffers=False,
                                                         output_device=device.index if ids else None,
                                                         find_unused_parameters=model.has_unused_parameters)


def maybe_compile(cfg, model):
    """torch.compile around the (possibly distributed) model when SOLVER.COMPILE is on."""
    if not cfg.SOLVER.COMPILE:
        return model
    return torch.compile(model)


def unwrap(model):
    """The plain module inside DistributedDataParallel and/or torch.compile wrappers."""
    while True:
        if hasattr(model, "module"):
            model = model.module
        elif hasattr(model, "_orig_mod"):
            model = model._orig_mod
        else:
            return model


def weights_digest(model):
    """A digest of the plain module's parameters and buffers, exactly: equal digests, equal weights."""
    digest = hashlib.blake2b(digest_size=16)
    for name, tensor in unwrap(model).state_dict().items():
        digest.update(name.encode())
        digest.update(str((tuple(tensor.shape), tensor.dtype)).encode())
        digest.update(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()
