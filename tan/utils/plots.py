"""PNG pictures: a query's 2D score map with its timeline, and training curves.

matplotlib is an optional extra (pip install 'tan[viz]'); it is imported only here.
"""
import os

import numpy as np

from ..errors import TanError
from .io import read_json_lines

FIGURE_DPI = 100
SCORE_MAP_SIZE = (13, 5.5)  # inches: 1300 x 550 pixels
CURVES_SIZE = (15, 4.5)  # 1500 x 450 pixels


def pyplot():
    """matplotlib's pyplot on the file-only Agg backend, or an error saying how to install it."""
    try:
        import matplotlib
    except ImportError:
        raise TanError("drawing pictures needs matplotlib, which is not installed: "
                       "pip install 'tan[viz]' (or pip install matplotlib)") from None
    matplotlib.use("Agg")  # files only, no display needed
    import matplotlib.pyplot as plt
    return plt


def save_figure(fig, path):
    """``fig`` as a PNG at ``path``, written atomically."""
    from .io import atomic_write_bytes
    import io
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=FIGURE_DPI)  # fixed size: no tight bbox
    atomic_write_bytes(path, buffer.getvalue())


def draw_score_map(path, picture, duration, gt, moments, moment_scores, title=""):
    """``picture``: one query's map as its model draws it (values, valid, starts and ends
    [R, C] seconds, row and column labels; tan.structures.candidates.ScoreMap), gt (start,
    end) seconds, moments [k, 2] seconds (ranked)."""
    plt = pyplot()
    from matplotlib.patches import Rectangle
    scores, valid = np.asarray(picture.values, dtype=np.float64), np.asarray(picture.valid, dtype=bool)
    starts, ends = np.asarray(picture.starts, dtype=np.float64), np.asarray(picture.ends, dtype=np.float64)
    fig, (ax_map, ax_line) = plt.subplots(1, 2, figsize=SCORE_MAP_SIZE, gridspec_kw={"width_ratios": [1, 1.35]})
    shown = np.ma.masked_where(~valid, scores)
    cmap = plt.get_cmap("viridis").copy()
    cmap.set_bad("#d9d9d9")  # cells that are not candidates
    image = ax_map.imshow(shown, cmap=cmap, vmin=0, vmax=max(float(scores.max()), 1e-6), origin="upper",
                          interpolation="nearest", aspect="equal" if scores.shape[0] == scores.shape[1] else "auto")
    fig.colorbar(image, ax=ax_map, fraction=0.046, pad=0.04, label="score")
    ax_map.set_xlabel(picture.col_label)
    ax_map.set_ylabel(picture.row_label)
    # ground-truth cell: the candidate overlapping the ground truth most
    iou = np.where(valid, _cell_iou(starts, ends, gt), -1)
    gi, gj = np.unravel_index(int(iou.argmax()), iou.shape)
    ax_map.add_patch(Rectangle((gj - 0.5, gi - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2.5))
    for rank, moment in enumerate(moments, 1):  # the valid cell whose moment it is
        distance = np.where(valid, np.abs(starts - moment[0]) + np.abs(ends - moment[1]), np.inf)
        i, j = np.unravel_index(int(distance.argmin()), distance.shape)
        ax_map.text(j, i, str(rank), ha="center", va="center", color="white", fontsize=9, fontweight="bold",
                    bbox={"boxstyle": "circle,pad=0.15", "facecolor": "black", "alpha": 0.7, "linewidth": 0})
    ax_map.set_title("2D score map (red: ground-truth cell, numbers: top moments)", fontsize=10)

    rows = [("ground truth", gt, None, "red")] + [
        (f"#{rank}", m, sc, "tab:blue") for rank, (m, sc) in enumerate(zip(moments, moment_scores), 1)]
    for y, (label, (s, e), sc, color) in enumerate(rows):
        ax_line.barh(y, e - s, left=s, height=0.6, color=color, alpha=0.85)
        text = f"{s:.1f}-{e:.1f} s" + (f"  score {sc:.3f}  IoU {_iou((s, e), gt):.2f}" if sc is not None else "")
        ax_line.text(duration * 1.01, y, text, va="center", fontsize=9)
    ax_line.set_yticks(range(len(rows)))
    ax_line.set_yticklabels([r[0] for r in rows])
    ax_line.invert_yaxis()
    ax_line.set_xlim(0, duration * 1.45)
    ax_line.set_xlabel("time (s)")
    ax_line.axvline(duration, color="black", linewidth=0.8)
    ax_line.set_title(f"timeline (video length {duration:.1f} s)", fontsize=10)
    if title:
        fig.suptitle(title, fontsize=11)
    fig.subplots_adjust(left=0.04, right=0.98, bottom=0.11, top=0.86, wspace=0.32)
    save_figure(fig, path)
    plt.close(fig)


def _cell_iou(starts, ends, gt):
    inter = np.clip(np.minimum(ends, gt[1]) - np.maximum(starts, gt[0]), 0, None)
    union = np.maximum(ends, gt[1]) - np.minimum(starts, gt[0])
    return inter / np.maximum(union, 1e-12)


def _iou(a, b):
    inter = max(0.0, min(a[1], b[1]) - max(a[0], b[0]))
    union = max(a[1], b[1]) - min(a[0], b[0])
    return inter / union if union > 0 else 0.0


def read_metrics(path):
    """(train records, validation records) of OUTPUT_DIR/metrics.jsonl (a folder or the file)."""
    if os.path.isdir(path):
        path = os.path.join(path, "metrics.jsonl")
    if not os.path.isfile(path):
        raise TanError(f"metrics file {path!r} not found (training writes OUTPUT_DIR/metrics.jsonl)")
    train, val = [], []
    for record in read_json_lines(path, f"metrics file {path!r}"):
        (val if "dataset" in record else train).append(record)
    if not train and not val:
        raise TanError(f"{path} holds no training or validation record")
    return train, val


def draw_curves(path, train, val, metrics=("R@1,IoU@0.5", "R@1,IoU@0.7", "R@5,IoU@0.5", "mIoU")):
    """Loss and learning rate per iteration; validation metrics per epoch."""
    plt = pyplot()
    fig, (ax_loss, ax_lr, ax_val) = plt.subplots(1, 3, figsize=CURVES_SIZE)
    if train:
        its = [r["iteration"] for r in train]
        ax_loss.plot(its, [r["loss"] for r in train], label="loss (median of window)", linewidth=1)
        ax_loss.plot(its, [r["loss_avg"] for r in train], label="loss (running mean)", linewidth=1)
        # a loss made of named terms (loss_iou, loss_vid, loss_sent, ...) shows each of them too
        for term in sorted({k for r in train for k in r if k.startswith("loss_") and k != "loss_avg"}):
            ax_loss.plot([r["iteration"] for r in train if term in r], [r[term] for r in train if term in r],
                         label=term, linewidth=1, linestyle="--")
        ax_loss.legend(fontsize=8)
        ax_lr.plot(its, [r["lr"] for r in train], color="tab:green")
        ax_lr.set_yscale("log")
    ax_loss.set_xlabel("iteration")
    ax_loss.set_title("training loss", fontsize=10)
    ax_lr.set_xlabel("iteration")
    ax_lr.set_title("learning rate", fontsize=10)
    for dataset in sorted({r["dataset"] for r in val}):
        records = sorted((r for r in val if r["dataset"] == dataset), key=lambda r: r["epoch"])
        for metric in metrics:
            ax_val.plot([r["epoch"] for r in records], [r[metric] for r in records], marker="o", markersize=3,
                        label=f"{dataset} {metric}")
    if val:
        ax_val.legend(fontsize=7)
    ax_val.set_xlabel("epoch")
    ax_val.set_ylabel("percent")
    ax_val.set_title("validation", fontsize=10)
    fig.subplots_adjust(left=0.05, right=0.98, bottom=0.14, top=0.9, wspace=0.25)
    save_figure(fig, path)
    plt.close(fig)
