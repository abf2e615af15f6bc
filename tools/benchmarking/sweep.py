"""tools/benchmark.py --sweep-n: memory and step time of training against the
number of clips N, for our implementation and the baseline side by side, so
that the growth of the cost with N is visible.

Each N gets the config with MODEL.{ARCH}.NUM_CLIPS N, INPUT.NUM_PRE_CLIPS
scaled with it (the config's rows per clip kept) and the pooling counts of
:func:`long_video_counts`; everything else is the config's (and the preset's
and overrides') own.
"""
import math

from tan.errors import TanError
from tan.utils.plots import pyplot, save_figure

SWEEP_ROWS = [("train_samples_per_s", "train samples/s", "{:.2f}"),
              ("train_activation_gb_per_sample", "kept GB/sample", "{:.3f}"),
              ("train_peak_growth_gb_per_sample", "peak GB/sample", "{:.3f}")]


def long_video_counts(n):
    """The pooling counts of N clips extending TACoS's [15, 8, 8, 8] at N 128: 15 offsets
    at stride 1, then 8 per doubling of the stride, up to the whole video (offset N - 1).
    Each doubling of N adds one group of 8 at twice the stride, so the candidate
    moments grow as N log N while the map grows as N^2."""
    if n < 32 or n & (n - 1):
        raise TanError(f"--sweep-n: N must be a power of two of at least 32, got {n}")
    return [15] + [8] * (int(math.log2(n)) - 4)


def parse_sizes(text):
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise TanError(f"--sweep-n: expected comma-separated integers such as 64,128,256, got {text!r}")
    for n in sizes:
        long_video_counts(n)
    if not sizes:
        raise TanError("--sweep-n: no N given")
    return sizes


def sweep_overrides(cfg, n):
    """KEY VALUE overrides that turn ``cfg`` into its N-clip version."""
    arch = cfg.MODEL.ARCHITECTURE
    if arch not in ("TAN", "MMN"):
        raise TanError(f"--sweep-n measures the 2D-map models TAN and MMN, not MODEL.ARCHITECTURE {arch!r}")
    rows_per_clip = cfg.INPUT.NUM_PRE_CLIPS // cfg.MODEL[arch].NUM_CLIPS
    return [f"MODEL.{arch}.NUM_CLIPS", str(n), f"MODEL.{arch}.FEAT2D.POOLING_COUNTS", str(long_video_counts(n)),
            "INPUT.NUM_PRE_CLIPS", str(n * rows_per_clip)]


def format_sweep(sweep):
    """The sweep's table: one row per N; for each figure, ours and the baseline side by side."""
    impls = list(sweep["impls"])
    width = 13
    names = "".join(f"{label:^{width * len(impls)}}" for _, label, _ in SWEEP_ROWS)
    sides = "".join(f"{impl:>{width}}" for _ in SWEEP_ROWS for impl in impls)
    lines = [f"sweep over N: {sweep['architecture']}, {sweep['device']} ({sweep['machine']}), batch {sweep['batch']}, "
             f"AMP {sweep['amp']}", f"{'':>5}" + names, f"{'N':>5}" + sides]
    for point in sweep["points"]:
        cells = ""
        for key, _, fmt in SWEEP_ROWS:
            for impl in impls:
                value = point["results"].get(impl, {}).get(key)
                cells += f"{(fmt.format(value) if value is not None else '-'):>{width}}"
        lines.append(f"{point['n']:>5}" + cells)
    return "\n".join(lines)


def plot_sweep(sweep, path):
    """Two panels against N (log-log): memory per sample and training speed, ours and the baseline."""
    plt = pyplot()  # matplotlib: the viz extra, with an error that says so
    fig, (memory, speed) = plt.subplots(1, 2, figsize=(10, 4))
    ns = [p["n"] for p in sweep["points"]]
    styles = {"ours": "-o", "reference": "--s"}
    names = {"ours": "ours", "reference": "baseline"}
    for impl in sweep["impls"]:
        results = [p["results"].get(impl, {}) for p in sweep["points"]]
        for key, label in (("train_activation_gb_per_sample", "kept"), ("train_peak_growth_gb_per_sample", "peak")):
            memory.plot(ns, [r.get(key) for r in results], styles[impl], label=f"{names[impl]}: {label}")
        speed.plot(ns, [r.get("train_samples_per_s") for r in results], styles[impl], label=names[impl])
    memory.set(xscale="log", yscale="log", xlabel="N (clips)", ylabel="GB per sample",
               title="training memory per sample")
    speed.set(xscale="log", yscale="log", xlabel="N (clips)", ylabel="samples/s", title="training speed")
    for ax in (memory, speed):
        ax.set_xticks(ns, [str(n) for n in ns])
        ax.tick_params(axis="x", which="minor", labelbottom=False)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle(f"{sweep['architecture']}, {sweep['machine']}, batch {sweep['batch']}, AMP {sweep['amp']}")
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
