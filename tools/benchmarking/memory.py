"""Activation memory of a training step, measured the same way on every device:
from the allocator's own records of each allocation and free during one step
(torch.profiler's memory events), not from a process-wide figure.

Two figures, both in bytes:

* *kept for backward*: what is still allocated, of the step's own
  allocations, when the backward starts (the first autograd engine event):
  the activations autograd saved, the loss and the outputs;
* *peak growth*: the highest level the step's allocations reach above where
  the step started (forward, backward and update together).
"""
from torch.profiler import ProfilerActivity, profile

BACKWARD_PREFIX = "autograd::engine::evaluate_function"


def step_memory(step, device):
    """Runs ``step()`` once under the profiler; returns (kept for backward, peak growth) in bytes
    on ``device``, or (None, None) when the profiler recorded no allocation there."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities, profile_memory=True) as prof:
        step()
    events = prof.profiler.kineto_results.events()
    backward = [e.start_ns() for e in events if e.name().startswith(BACKWARD_PREFIX)]
    start_backward = min(backward) if backward else None
    allocations = sorted((e.start_ns(), e.nbytes()) for e in events
                         if e.name() == "[memory]" and e.device_type().name == device.type.upper())
    if not allocations:
        return None, None
    level = peak = 0
    kept = None
    for time, nbytes in allocations:
        if kept is None and start_backward is not None and time >= start_backward:
            kept = level
        level += nbytes
        peak = max(peak, level)
    return kept, peak
