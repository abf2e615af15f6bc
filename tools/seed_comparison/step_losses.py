"""Step by step, the loss terms of MMN's own training (mmn_cpu.py --dump) and of a tan-train run
from its initial weights on the same batches (SEED 0, MODEL.WEIGHT RUN/init.pth, SOLVER.LOG_PERIOD 1),
and the step where they first differ by more than --tolerance.

  python tools/seed_comparison/step_losses.py --reference-run REF_RUN --tan-run TAN_RUN
"""
import argparse
import json
import os

TERMS = ("loss_iou", "loss_vid", "loss_sent")


def build_parser():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference-run", required=True, help="mmn_cpu.py --dump's --out (its losses.json)")
    parser.add_argument("--tan-run", required=True, help="the tan-train run's OUTPUT_DIR (its metrics.jsonl)")
    parser.add_argument("--tolerance", type=float, default=1e-6)
    return parser


def step_losses(reference_run, tan_run):
    """[(step, epoch, {term: (reference, tan)})] over the steps both recorded."""
    with open(os.path.join(reference_run, "losses.json")) as f:
        reference = json.load(f)
    path = os.path.join(tan_run, "metrics.jsonl")
    with open(path) as f:
        ours = [row for row in map(json.loads, f) if "loss_iou" in row]
    if [row["iteration"] for row in ours] != list(range(1, len(ours) + 1)):
        raise SystemExit(f"{path}: expected a row for every step (the run's SOLVER.LOG_PERIOD 1), got the steps "
                         f"{[row['iteration'] for row in ours][:5]} ...")
    return [(step, ref["epoch"], {t: (ref[t], tan[t]) for t in TERMS})
            for step, (ref, tan) in enumerate(zip(reference, ours), 1)]


def main(argv=None):
    args = build_parser().parse_args(argv)
    rows = step_losses(args.reference_run, args.tan_run)
    parted = None
    print("step | epoch | " + " | ".join(f"{t} reference, tan" for t in TERMS) + " | largest difference")
    for step, epoch, terms in rows:
        worst = max(abs(a - b) for a, b in terms.values())
        if parted is None and worst > args.tolerance:
            parted = step
        print(f"{step} | {epoch} | " + " | ".join(f"{a:.6f}, {b:.6f}" for a, b in terms.values()) + f" | {worst:.1e}")
    print(f"{len(rows)} steps; " + (f"first difference above {args.tolerance:g} at step {parted}" if parted
                                    else f"all within {args.tolerance:g}"))


if __name__ == "__main__":
    main()
