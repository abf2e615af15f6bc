"""One optimisation step: the contract shared by the trainer, the benchmark
and the CUDA smoke tool, so that what they measure is what training does."""
import torch

from .precision import autocast
from .wrappers import unwrap


def move_batch(batch, device):
    """A collated batch on ``device``; sentence lengths stay on the CPU (packing reads them there)."""
    return {k: (v.to(device, non_blocking=True) if k != "wordlens" else v) for k, v in batch.items()}  # ranked too


def forward_batch(model, batch, window_terms=False):
    """The model's output for a collated batch already on its device (a batch of
    videos names each sentence's video in ``video_index``; videos of different
    lengths, from a clip input of variable length, give their real lengths in
    ``clip_counts``). With ``window_terms`` (training a model with cross-window
    losses), (output, their terms), from the batch's ranked windows."""
    options = {"clip_counts": batch["clip_counts"]} if "clip_counts" in batch else {}
    if window_terms:
        options.update(ranked=batch.get("ranked"), window_terms=True)
    return model(batch["feats"], batch["queries"], batch["wordlens"], batch.get("video_index"), **options)


def run_step(model, batch, optimizer, grad_scaler, amp, device, clip_grad_norm=0.0):
    """Forward, loss, backward and update for one batch; returns (loss, its named terms).

    The losses are returned as device tensors and not read back, so nothing
    here waits for the device. ``grad_scaler`` is the one of make_grad_scaler:
    it scales the loss for fp16 and passes through otherwise. The gradient norm
    is clipped at ``clip_grad_norm`` when it is positive (the model's recipe).
    """
    batch = move_batch(batch, device)
    core = unwrap(model)
    with autocast(amp, device):
        if core.window_losses is not None:
            output, across = forward_batch(model, batch, window_terms=True)
        else:
            output, across = forward_batch(model, batch), {}
    terms = core.losses(output, batch)  # float32
    if across:  # the model's own term beside them, under a name that is not the total's
        terms = {**{("model_loss" if name == "loss" else name): term for name, term in terms.items()}, **across}
    loss = sum(terms.values())
    optimizer.zero_grad(set_to_none=True)
    scaling = grad_scaler is not None and grad_scaler.is_enabled()
    (grad_scaler.scale(loss) if scaling else loss).backward()
    if clip_grad_norm > 0:
        if scaling:
            grad_scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(core.parameters(), clip_grad_norm)
    if scaling:
        grad_scaler.step(optimizer)
        grad_scaler.update()
    else:
        optimizer.step()
    return loss.detach(), ({k: v.detach() for k, v in terms.items()} if len(terms) > 1 else {})
