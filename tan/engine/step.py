"""One optimisation step: the contract shared by the trainer, the benchmark
and the CUDA smoke tool, so that what they measure is what training does."""
from .precision import autocast
from .wrappers import unwrap


def move_batch(batch, device):
    """A collated batch on ``device``; sentence lengths stay on the CPU (packing reads them there)."""
    return {k: (v.to(device, non_blocking=True) if k != "wordlens" else v) for k, v in batch.items()}


def run_step(model, batch, optimizer, grad_scaler, amp, device):
    """Forward, loss, backward and update for one batch; returns the loss.

    The loss is returned as a device tensor and not read back, so nothing here
    waits for the device. ``grad_scaler`` is the one of make_grad_scaler: it
    scales the loss for fp16 and passes through otherwise.
    """
    batch = move_batch(batch, device)
    with autocast(amp, device):
        logits = model(batch["feats"], batch["queries"], batch["wordlens"])  # [B, N, N]
    loss = unwrap(model).loss(logits, batch["moments"], batch["durations"])  # float32
    optimizer.zero_grad(set_to_none=True)
    if grad_scaler is not None and grad_scaler.is_enabled():
        grad_scaler.scale(loss).backward()
        grad_scaler.step(optimizer)
        grad_scaler.update()
    else:
        loss.backward()
        optimizer.step()
    return loss.detach()
