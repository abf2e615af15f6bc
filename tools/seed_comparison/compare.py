"""Both trainings over seeds on one dataset, one run after the other, and the table: the test R@1 at
IoU 0.5 of each seed, each side's mean, sample standard deviation and lowest seed (README.md here).
A run whose folder is complete is not run again. --model: 2D-TAN against chenjoya/2dtan (default),
MMN against MCG-NJU/MMN, or MS-2D-TAN against microsoft/VideoX (--reference: a checkout of that code).

  python tools/seed_comparison/compare.py --reference PATH --data ROOT --runs RUNS --seeds 1 2 3 4 5 6 7 8
"""
import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
RECALL = "R@1,IoU@0.5"


def bert_options(data):
    """The small DistilBERT both MMNs read (written once under the dataset's root)."""
    from mmn_cpu import write_bert  # transformers: only for MMN
    return ["MODEL.MMN.TEXT_ENCODER.BERT.PRETRAINED", write_bert(data)]


def videox_root(data):
    """VideoX's data folder made of the dataset (once), which tan's ms2dtan_tacos_c3d datasets read."""
    from videox_cpu import lay_out
    return lay_out(data)


# per model: the reference's runner and its log, tan's config, DATASETS.ROOT and other options
MODELS = {
    "2dtan": dict(runner="chenjoya_cpu", log="log.txt", config="tan.yaml", root=lambda data: data,
                  opts=lambda data: []),
    "mmn": dict(runner="mmn_cpu", log="log.txt", config="mmn_tan.yaml", root=lambda data: data, opts=bert_options),
    "ms2dtan": dict(runner="videox_cpu", log="log/*/*/*.log", finished="finished", config="ms2dtan_tan.yaml",
                    root=videox_root, opts=lambda data: []),
}


# how each reference's table heads the column of R@1 at IoU 0.5 (chenjoya/2dtan, MMN, VideoX)
REFERENCE_HEADERS = ("Rank@1,mIoU@0.5", "R@1,IoU@0.5", "R1@0.5")


def reference_result(folder, log="log.txt", finished=None):
    """The R@1 IoU 0.5 of the last table its log printed (the column headed so; VideoX's last table
    is its last epoch's test). ``finished``: a file the runner writes once the reference's run has
    returned, for a reference that prints a table every epoch (None: its table comes at the end)."""
    found = sorted(glob.glob(os.path.join(folder, log)))
    if not found or (finished and not os.path.isfile(os.path.join(folder, finished))):
        return None
    value, header = None, None
    with open(found[-1]) as f:
        for line in f:
            if not line.startswith("|"):
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if any(c in REFERENCE_HEADERS for c in cells):
                header = cells
            elif header and len(cells) == len(header) and all(re.fullmatch(r"[\d.]+", c) for c in cells):
                value = float(cells[next(i for i, c in enumerate(header) if c in REFERENCE_HEADERS)])
    return value


def tan_result(folder):
    found = sorted(glob.glob(os.path.join(folder, "inference", "model_final", "*", "metrics.json")))
    if not found:
        return None
    with open(found[0]) as f:
        return float(json.load(f)[RECALL])


def test_moments(data):
    """(queries, moments) of the dataset's test split: a moment asked in several phrasings counts once.
    A model reads a moment's phrasings alike, so a test figure moves in steps of moments: over M
    moments, which of them a run gets right spreads its figure by about 100 * sqrt(p (1 - p) / M)
    from seed to seed, whatever the training."""
    with open(os.path.join(data, "tacos", "annotations", "test.json")) as f:
        annotations = json.load(f)
    queries = sum(len(a["timestamps"]) for a in annotations.values())
    moments = sum(len({tuple(t) for t in a["timestamps"]}) for a in annotations.values())
    return queries, moments


def summary(reference, ours):
    """The criteria of a comparison, tan against the reference (lists of per-seed figures): the
    gap of the means, Welch's t of it, the ratio of the standard deviations, and how far tan's
    lowest seed falls below the reference's mean."""
    gap = statistics.mean(reference) - statistics.mean(ours)
    error = (statistics.variance(reference) / len(reference) + statistics.variance(ours) / len(ours)) ** 0.5
    return dict(gap=gap, welch_t=gap / error if error else float("inf"),
                sd_ratio=statistics.stdev(ours) / statistics.stdev(reference),
                lowest_below=statistics.mean(reference) - min(ours))


def run(command, log):
    with open(log, "w") as f:
        subprocess.run(command, stdout=f, stderr=subprocess.STDOUT, check=True, cwd=REPO)


def build_parser():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=tuple(MODELS), default="2dtan")
    parser.add_argument("--reference", required=True, help="a checkout of the model's reference code")
    parser.add_argument("--data", required=True, help="the dataset's root (make_dataset.py --root)")
    parser.add_argument("--runs", required=True, help="folder of the runs: ref_SEED/ and tan_SEED/")
    parser.add_argument("--seeds", type=int, nargs="+", required=True)
    parser.add_argument("--side", choices=("both", "reference", "tan"), default="both")
    parser.add_argument("--tan-opts", nargs=argparse.REMAINDER, default=[], help="more KEY VALUE for tan-train")
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    # the runs start in the repository's root: paths as the caller meant them
    args.reference, args.data, args.runs = (os.path.abspath(p) for p in (args.reference, args.data, args.runs))
    os.makedirs(args.runs, exist_ok=True)
    model = MODELS[args.model]
    root, opts = model["root"](args.data), model["opts"](args.data)
    table = {"reference": {}, "tan": {}}

    def reference_figure(folder):
        return reference_result(folder, model["log"], model.get("finished"))

    for seed in args.seeds:
        ref, ours = os.path.join(args.runs, f"ref_{seed}"), os.path.join(args.runs, f"tan_{seed}")
        if args.side != "tan" and reference_figure(ref) is None:
            os.makedirs(ref, exist_ok=True)
            run([sys.executable, os.path.join(HERE, model["runner"] + ".py"), "--reference", args.reference, "--data",
                 args.data, "--seed", str(seed), "--out", ref], os.path.join(ref, "stdout.txt"))
        if args.side != "reference" and tan_result(ours) is None:
            run([sys.executable, os.path.join(REPO, "tools", "train_net.py"), "--config-file",
                 os.path.join(HERE, model["config"]), "DATASETS.ROOT", root, "SEED", str(seed), "OUTPUT_DIR",
                 ours, *opts, *args.tan_opts], os.path.join(args.runs, f"tan_{seed}.stdout"))
        table["reference"][seed], table["tan"][seed] = reference_figure(ref), tan_result(ours)
    print(f"test {RECALL}, percent | " + " | ".join(f"seed {s}" for s in args.seeds) + " | mean | sd | lowest")
    for side, values in table.items():
        got = [v for v in values.values() if v is not None]
        if not got:
            continue
        stats = (f"{statistics.mean(got):.2f} | {statistics.stdev(got) if len(got) > 1 else 0:.2f} | {min(got):.2f}")
        print(f"{side} | " + " | ".join("-" if v is None else f"{v:.2f}" for v in values.values()) + f" | {stats}")
    reference, ours = ([v for v in table[side].values() if v is not None] for side in ("reference", "tan"))
    if len(reference) > 1 and len(ours) > 1:
        c = summary(reference, ours)
        print(f"tan against the reference: means {c['gap']:+.2f} apart (reference - tan; Welch t {c['welch_t']:.2f}), "
              f"sd ratio {c['sd_ratio']:.2f}, tan's lowest seed {c['lowest_below']:.2f} under the reference's mean")
    queries, moments = test_moments(args.data)
    if reference:
        p = statistics.mean(reference) / 100
        print(f"test split: {queries} queries of {moments} moments; which moments a run gets right alone spreads "
              f"a figure near {100 * p:.1f} by about {100 * (p * (1 - p) / moments) ** 0.5:.2f} points between seeds")


if __name__ == "__main__":
    main()
