"""CPU_KEEP_FREED_MEMORY: glibc's malloc keeps freed blocks for the next step
instead of returning them to the system and faulting them in again
(tan/engine/cpu_allocator.py). Each case runs in a fresh interpreter: the
setting is per process and cannot be undone."""
import json
import platform
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO, SYNTHETIC_CONFIG

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the setting applies to glibc only")

# Training steps of a small 2D-TAN (the benchmark's workload), the setting applied
# as the trainer applies it; minor page faults counted over the later steps.
STEPS = textwrap.dedent("""
    import json, resource, sys
    sys.path.insert(0, "tools")
    import torch
    from benchmarking import workloads as W
    from tan.config import load_config
    from tan.engine.cpu_allocator import keeps_freed_memory
    from tan.engine.precision import configure_backends
    torch.set_num_threads(1)
    opts = ["MODEL.TAN.NUM_CLIPS", "32", "MODEL.TAN.FEAT2D.POOLING_COUNTS", "[15, 8]", "INPUT.NUM_PRE_CLIPS", "64",
            "MODEL.TAN.FEATPOOL.KERNEL_SIZE", "2",
            "MODEL.TAN.FEATPOOL.HIDDEN_SIZE", "64", "MODEL.TAN.PREDICTOR.HIDDEN_SIZE", "64",
            "MODEL.TAN.INTEGRATOR.QUERY_HIDDEN_SIZE", "64", "MODEL.TAN.PREDICTOR.NUM_STACK_LAYERS", "2",
            "CPU_KEEP_FREED_MEMORY", sys.argv[2]]
    cfg = load_config(sys.argv[1], opts)
    device = torch.device("cpu")
    configure_backends(cfg, device)
    model = W.build_ours(cfg, device)
    step = W.our_train_step(cfg, model, W.random_batch(cfg, 16, device), device)
    for _ in range(2):
        step()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(3):
        step()
    print(json.dumps({"faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before,
                      "kept": keeps_freed_memory()}))
""")


def run_steps(keep):
    proc = subprocess.run([sys.executable, "-c", STEPS, SYNTHETIC_CONFIG, keep], capture_output=True, text=True, cwd=REPO,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.mark.slow
def test_training_steps_reuse_kept_memory_instead_of_faulting_it_in_again():
    default, kept = run_steps("False"), run_steps("True")
    assert not default["kept"] and kept["kept"]
    assert kept["faults"] < 0.25 * default["faults"], (kept, default)
