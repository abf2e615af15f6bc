"""Runs of one config over several seeds, summed up: for every metric, the mean, the standard
deviation, the range and each seed's value (docs/seeds.md). Printed, and written as JSON and CSV.

The standard deviation is the sample one (n - 1 in the denominator), the spread a reader of a
table of several seeds expects; with a single seed it is 0.
"""
import csv
import io
import json
import math
import os
import re

from tan.utils.io import atomic_write_text
from tan.utils.held_signals import signals_held

SEED_FOLDER = re.compile(r"seed_(-?\d+)")
JSON_NAME = "seeds_summary.json"
CSV_NAME = "seeds_summary.csv"
# what metrics.json holds beside the metrics
_NOT_METRICS = {"checkpoint", "num_queries", "labeled", "note"}


def seed_folder(output_dir, seed):
    """Where seed ``seed`` of a run over several seeds lives: OUTPUT_DIR/seed_{seed}."""
    return os.path.join(output_dir, f"seed_{seed}")


def seed_of_checkpoint(path):
    """The seed of a checkpoint in a seed folder (…/seed_3/model_final.pth -> 3), else None."""
    found = SEED_FOLDER.fullmatch(os.path.basename(os.path.dirname(os.path.abspath(path))))
    return int(found.group(1)) if found else None


def metrics_of(record):
    """The metrics of one metrics.json record: its numbers, without the bookkeeping and the buckets."""
    return {k: float(v) for k, v in record.items()
            if k not in _NOT_METRICS and isinstance(v, (int, float)) and not isinstance(v, bool)}


def summarize(by_seed):
    """``by_seed``: {seed: {(model, dataset): {metric: value}}}. One row per (model, dataset, metric)
    that every seed has: {"model", "dataset", "metric", "seeds", "mean", "std", "min", "max", "values"}
    (values: {seed: value}), in the first seed's order."""
    seeds = sorted(by_seed)
    if not seeds:
        return []
    rows = []
    for key, metrics in by_seed[seeds[0]].items():
        for metric in metrics:
            values = [by_seed[s].get(key, {}).get(metric) for s in seeds]
            if any(v is None for v in values):
                continue
            mean = sum(values) / len(values)
            std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0
            rows.append({"model": key[0], "dataset": key[1], "metric": metric, "seeds": len(values),
                         "mean": mean, "std": std, "min": min(values), "max": max(values),
                         "values": dict(zip(seeds, values))})
    return rows


def format_summary(rows):
    """A text table per (model, dataset): metric, mean ± std, min .. max, then each seed's value."""
    lines = []
    groups = {}
    for row in rows:
        groups.setdefault((row["model"], row["dataset"]), []).append(row)
    for (model, dataset), group in groups.items():
        seeds = list(group[0]["values"])
        width = max(len(r["metric"]) for r in group) + 2
        lines.append(f"{model} on {dataset}, {len(seeds)} seeds (mean ± sample std, min .. max, each seed)")
        lines.append("metric".ljust(width) + "mean ± std".rjust(16) + "min .. max".rjust(18)
                     + "".join(f"seed {s}".rjust(10) for s in seeds))
        for r in group:
            lines.append(r["metric"].ljust(width) + f"{r['mean']:.2f} ± {r['std']:.2f}".rjust(16)
                         + f"{r['min']:.2f} .. {r['max']:.2f}".rjust(18)
                         + "".join(f"{r['values'][s]:.2f}".rjust(10) for s in seeds))
        lines.append("")
    return "\n".join(lines).rstrip("\n")


def write_summary(folder, rows, seeds, folders, suffix=""):
    """``folder``/seeds_summary.json and seeds_summary.csv (seeds_summary_{suffix}.* with ``suffix``), both
    new or both as they were. ``seeds``: the seeds summed up; ``folders``: {seed: its run folder}.
    Returns the two paths."""
    record = {"seeds": list(seeds), "folders": {str(s): folders[s] for s in seeds},
              "std": "sample standard deviation (n - 1)",
              "rows": [dict(r, values={str(s): v for s, v in r["values"].items()}) for r in rows]}
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(["model", "dataset", "metric", "seeds", "mean", "std", "min", "max",
                     *[f"seed_{s}" for s in seeds]])
    for r in rows:
        writer.writerow([r["model"], r["dataset"], r["metric"], r["seeds"],
                         *(round(r[k], 4) for k in ("mean", "std", "min", "max")),
                         *(round(r["values"][s], 4) for s in seeds)])
    names = (JSON_NAME, CSV_NAME) if not suffix else (f"seeds_summary_{suffix}.json", f"seeds_summary_{suffix}.csv")
    paths = tuple(os.path.join(folder, n) for n in names)
    os.makedirs(folder, exist_ok=True)
    with signals_held():
        atomic_write_text(paths[0], json.dumps(record, indent=2) + "\n")
        atomic_write_text(paths[1], text.getvalue())
    return paths


def publish_summary(folder, by_seed, folders, logger, suffix="", run=""):
    """:func:`summarize` ``by_seed``, write it into ``folder`` (:func:`write_summary`) and log it as a table;
    ``run`` names the run in the log line. Returns the rows."""
    rows = summarize(by_seed)
    paths = write_summary(folder, rows, sorted(by_seed), folders, suffix=suffix)
    logger.info("summary over seeds %s%s, also in %s and %s:\n%s", ", ".join(map(str, sorted(by_seed))),
                f" of {run}" if run else "", *paths, format_summary(rows))
    return rows
