"""What one training step of 2D-TAN keeps for its backward, counted as autograd holds it,
for tan and for chenjoya/2dtan's own code (imported from its checkout), each in a fresh
process so that the two never share an allocator or a peak.

Two figures per implementation:

* *saved*: the bytes of every storage that autograd saves in the forward
  (torch.autograd.graph.saved_tensors_hooks sees each saved tensor; a saved
  view keeps its whole storage alive, so storages are counted whole, each
  once), leaving out the model's parameters and buffers, which live anyway;
  per sample of the batch;
* *peak growth*: how far the process's resident memory rises above where the
  step started, forward, backward and update together (Linux: the kernel's
  high-water mark VmHWM, reset before the step through /proc/self/clear_refs).
  The step measured is the second: the first allocates the optimizer's state,
  which stays. The child processes set MALLOC_MMAP_THRESHOLD_ so that the C
  library maps every large block afresh and gives it back when freed: resident
  memory then follows what is allocated, not what an earlier step left cached.

The inputs are random, of the config's real shapes (TACoS: 256 clips of 4096
C3D features, 128 x 128 map, 8 layers of kernel 5, 512 channels), float32.

Run as a script it measures one implementation and prints JSON:
    python tools/benchmarking/saved_memory.py --impl tan --config-file FILE [--batch 2]
    python tools/benchmarking/saved_memory.py --impl chenjoya --reference-code PATH [--batch 2]
"""
import argparse
import json
import os
import subprocess
import sys

import torch

WORDS = 12  # words per sentence, both sides
MMAP_THRESHOLD = 1 << 20  # bytes: blocks from this size on are mapped, and unmapped when freed
REFERENCE_CONFIG = os.path.join("configs", "2dtan_128x128_pool_k5l8_tacos.yaml")  # in chenjoya/2dtan's checkout


class SavedStorages:
    """Within the block, every storage autograd saves, counted once and whole; those in
    ``exclude`` (data pointers of the model's parameters and buffers) apart."""

    def __init__(self, exclude):
        self.exclude = set(exclude)
        self.storages, self.model_storages = {}, {}
        self.hooks = torch.autograd.graph.saved_tensors_hooks(self.pack, lambda tensor: tensor)

    def pack(self, tensor):
        storage = tensor.untyped_storage()
        if storage.nbytes():
            kept = self.model_storages if storage.data_ptr() in self.exclude else self.storages
            kept[storage.data_ptr()] = storage.nbytes()
        return tensor

    def __enter__(self):
        self.hooks.__enter__()
        return self

    def __exit__(self, *exc):
        return self.hooks.__exit__(*exc)

    @property
    def nbytes(self):
        return sum(self.storages.values())

    @property
    def model_nbytes(self):
        """The model's own storages that were saved (its weights, for their inputs' gradients)."""
        return sum(self.model_storages.values())


def model_storages(model):
    return [t.untyped_storage().data_ptr() for t in list(model.parameters()) + list(model.buffers())]


def _status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise OSError(f"/proc/self/status has no {field}")


def reset_peak():
    """The resident size now (KiB), the high-water mark reset to it; None where Linux's files are missing."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return _status_kib("VmRSS")
    except OSError:
        return None


def peak_growth(start):
    return (_status_kib("VmHWM") - start) * 1024 if start is not None else None


def measure(model, forward_loss, optimizer):
    """Two steps (forward_loss() -> loss): {saved bytes, saved bytes with the model's own storages
    that autograd saves too, peak RSS growth of the first step and of the second (None off Linux)}."""
    peaks = []
    for _ in range(2):
        optimizer.zero_grad()
        start = reset_peak()
        with SavedStorages(model_storages(model)) as saved:
            loss = forward_loss()
        loss.backward()
        optimizer.step()
        peaks.append(peak_growth(start))
        del loss
    return {"saved": saved.nbytes, "saved_with_model": saved.nbytes + saved.model_nbytes,
            "first_step_peak": peaks[0], "peak": peaks[1]}


def random_inputs(batch, clips, feature_size, query_size, seed=0):
    gen = torch.Generator().manual_seed(seed)
    feats = torch.randn(batch, clips, feature_size, generator=gen).abs()
    queries = torch.randn(batch, WORDS, query_size, generator=gen)
    wordlens = torch.randint(WORDS // 2, WORDS + 1, (batch,), generator=gen)
    durations = torch.rand(batch, generator=gen) * 100 + 20
    starts = torch.rand(batch, generator=gen) * 0.7 * durations
    moments = torch.stack([starts, starts + (0.05 + 0.25 * torch.rand(batch, generator=gen)) * durations], dim=1)
    return feats, queries, wordlens, durations, moments


def measure_tan(config_file, batch, opts=()):
    """tan's 2D-TAN with the optimizer training builds (tan.solver, from the model's recipe: the
    same Adam as the reference's, run by torch's multi-tensor kernels)."""
    from tan.config import load_config
    from tan.engine.step import forward_batch
    from tan.modeling import build_model
    from tan.solver import build_optimizer

    cfg = load_config(config_file, ["MODEL.DEVICE", "cpu", *opts])
    torch.manual_seed(0)
    model = build_model(cfg).train()
    feats, queries, wordlens, durations, moments = random_inputs(
        batch, cfg.INPUT.NUM_PRE_CLIPS, cfg.MODEL.TAN.FEATPOOL.INPUT_SIZE, cfg.INPUT.PRE_QUERY_SIZE)
    inputs = dict(feats=feats, queries=queries, wordlens=wordlens, durations=durations, moments=moments,
                  gt_moments=moments[:, None])
    optimizer = build_optimizer(cfg, model, model.recipe(cfg))

    def forward_loss():
        return sum(model.losses(forward_batch(model, inputs), inputs).values())
    return measure(model, forward_loss, optimizer)


def measure_chenjoya(code, batch):
    """chenjoya/2dtan's TAN from its own modules and TACoS config; its loss from the IoU map
    its dataset stores per query (computed here from the same moments)."""
    sys.path.insert(0, os.path.abspath(code))
    torch.Tensor.cuda = lambda self, *a, **k: self  # its feat2d moves the mask to "cuda"
    move = torch.Tensor.to
    torch.Tensor.to = lambda self, *a, **k: move(self, *("cpu" if a and a[0] == "cuda" else x for x in a), **k)
    from tan.config import cfg  # its package, not ours: this process never imports ours
    from tan.modeling import build_model

    cfg.merge_from_file(os.path.join(code, REFERENCE_CONFIG))
    torch.manual_seed(0)
    model = build_model(cfg).train()
    n = cfg.MODEL.TAN.NUM_CLIPS
    feats, queries, wordlens, durations, moments = random_inputs(
        batch, cfg.INPUT.NUM_PRE_CLIPS, cfg.MODEL.TAN.FEATPOOL.INPUT_SIZE, cfg.INPUT.PRE_QUERY_SIZE)
    ious2d = torch.rand(batch, n, n)
    batches = type("Batches", (), {"feats": feats, "queries": queries, "wordlens": wordlens})()
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.SOLVER.LR)
    return measure(model, lambda: model(batches, ious2d), optimizer)


def in_fresh_process(impl, batch, config_file=None, reference_code=None, opts=()):
    """{"saved_per_sample_gb", "peak_growth_gb"} of ``impl`` ("tan" or "chenjoya"), measured in a child."""
    cmd = [sys.executable, os.path.abspath(__file__), "--impl", impl, "--batch", str(batch)]
    if config_file:  # the child runs in the repository: paths as the caller meant them
        cmd += ["--config-file", os.path.abspath(config_file)]
    if reference_code:
        cmd += ["--reference-code", os.path.abspath(reference_code)]
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_=str(MMAP_THRESHOLD))
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if impl == "tan":
        env["PYTHONPATH"] = repo + os.pathsep + env.get("PYTHONPATH", "")
    else:  # its own package is named tan too: keep ours out of its path
        env.pop("PYTHONPATH", None)
    proc = subprocess.run(cmd + list(opts), capture_output=True, text=True, env=env, cwd=repo)
    if proc.returncode:
        raise RuntimeError(f"measuring {impl} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


COLUMNS = (("saved_per_sample_gb", "saved / sample"), ("saved_with_model_per_sample_gb", "saved, weights too"),
           ("peak_growth_gb", "step peak growth"), ("first_step_peak_growth_gb", "first step's"))


def format_report(report):
    """The figures (GB) side by side, each with its multiple of the reference's own code's when measured."""
    results = report["results"]
    base = results.get("chenjoya/2dtan")
    lines = [f"what one 2D-TAN training step keeps for its backward ({report['config']}, batch {report['batch']}, "
             f"float32, CPU: {report['machine']}, torch {report['torch']}); a fresh process each, "
             f"MALLOC_MMAP_THRESHOLD_={MMAP_THRESHOLD}; the step peak is the second step's (the first also "
             f"allocates the optimizer's state); GB, x the reference's",
             f"{'':16}" + "".join(f"{title:>24}" for _, title in COLUMNS)]
    for name, row in results.items():
        cells = []
        for key, _ in COLUMNS:
            value, of = row.get(key), base.get(key) if base else None
            ratio = f" ({value / of:.2f}x)" if value and of else ""
            cells.append(f"{value:.3f}{ratio}" if value is not None else "n/a")
        lines.append(f"{name:16}" + "".join(f"{c:>24}" for c in cells))
    if base is None:
        lines.append("(no --reference-code: chenjoya/2dtan's own code was not measured)")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--impl", choices=("tan", "chenjoya"), required=True)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--config-file")
    parser.add_argument("--reference-code")
    parser.add_argument("opts", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    if args.impl == "tan":
        figures = measure_tan(args.config_file, args.batch, args.opts)
    else:
        figures = measure_chenjoya(args.reference_code, args.batch)

    def gb(value, per=1):
        return value / per / 1e9 if value is not None else None
    print(json.dumps({"saved_per_sample_gb": gb(figures["saved"], args.batch),
                      "saved_with_model_per_sample_gb": gb(figures["saved_with_model"], args.batch),
                      "peak_growth_gb": gb(figures["peak"]), "first_step_peak_growth_gb": gb(figures["first_step_peak"]),
                      "batch": args.batch}))


if __name__ == "__main__":
    main()
