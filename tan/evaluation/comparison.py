"""Several checkpoints' test figures side by side: one table, printed and
written as JSON and CSV (docs/metric.md §5)."""
import csv
import io
import json
import os

from ..config.choices import metric_names
from ..config.evaluators import EVALUATORS
from ..utils.io import atomic_write_text
from ..utils.held_signals import signals_held

JSON_NAME = "comparison.json"
CSV_NAME = "comparison.csv"
LEFT_OUT_NAME = "left_out.json"  # the checkpoints asked for that the comparison lacks, and why


def comparison_rows(results, checkpoints):
    """One row per (checkpoint, dataset): ``results`` is {name: {dataset: metrics}}
    in the order evaluated, ``checkpoints`` {name: path}. The columns: our metrics, then those figures
    of the evaluators (their COMPARED: Moment-DETR's, docs/metric.md §6) that every row has."""
    measured = [metrics for by_dataset in results.values() for metrics in by_dataset.values()
                if metrics]  # a split without labels has no metric to compare
    compared = [m for name in EVALUATORS.names() for m in EVALUATORS.get(name).COMPARED]
    extra = [m for m in compared if measured and all(m in r for r in measured)]
    return [{"name": name, "checkpoint": checkpoints.get(name, ""), "dataset": dataset,
             **{m: metrics[m] for m in metric_names() + extra}}
            for name, by_dataset in results.items() for dataset, metrics in by_dataset.items() if metrics]


def _metric_columns(rows):
    return [k for k in rows[0] if k not in ("name", "checkpoint", "dataset")] if rows else metric_names()


def format_comparison(rows):
    """A text table, the best value of each metric per dataset marked with *."""
    metrics = _metric_columns(rows)
    best = {}
    for row in rows:
        for m in metrics:
            best[row["dataset"], m] = max(best.get((row["dataset"], m), float("-inf")), row[m])
    name_width = max([len("checkpoint")] + [len(r["name"]) for r in rows]) + 2
    data_width = max([len("dataset")] + [len(r["dataset"]) for r in rows]) + 2
    columns = [m.replace(",", " ") for m in metrics]
    widths = [max(len(c), 6) + 2 for c in columns]
    lines = ["checkpoint".ljust(name_width) + "dataset".ljust(data_width)
             + "".join(c.rjust(w) + " " for c, w in zip(columns, widths))]
    for row in rows:
        cells = [f"{row[m]:.2f}{'*' if len(rows) > 1 and row[m] == best[row['dataset'], m] else ' '}"
                 for m in metrics]
        lines.append(row["name"].ljust(name_width) + row["dataset"].ljust(data_width)
                     + "".join(c.rjust(w + 1) for c, w in zip(cells, widths)))
    return "\n".join(lines)


def write_comparison(folder, rows, left_out=()):
    """``folder``/comparison.json and comparison.csv, written together (both new or both as they were),
    and left_out.json when checkpoints asked for were left out (``left_out``: [(path, why)]; an older
    left_out.json is removed otherwise, so that it never describes another comparison). Returns the
    paths of the comparison's two files."""
    metrics = _metric_columns(rows)
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=["name", "checkpoint", "dataset", *metrics], lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()})
    paths = os.path.join(folder, JSON_NAME), os.path.join(folder, CSV_NAME)
    os.makedirs(folder, exist_ok=True)
    left_out_path = os.path.join(folder, LEFT_OUT_NAME)
    with signals_held():
        atomic_write_text(paths[0], json.dumps(rows, indent=2) + "\n")
        atomic_write_text(paths[1], text.getvalue())
        if left_out:
            atomic_write_text(left_out_path, json.dumps([{"checkpoint": path, "why": why} for path, why in left_out],
                                                        indent=2) + "\n")
        elif os.path.lexists(left_out_path):
            os.unlink(left_out_path)
    return paths
