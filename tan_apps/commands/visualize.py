"""Draw PNG pictures: score maps of chosen test queries, or training curves.

  scores  For each chosen query of a dataset: its 2D score map (invalid cells
          grey, the ground-truth cell outlined, the top-k moments numbered)
          next to a timeline of the video with the ground truth and the
          predictions. One PNG per query in --out.
  curves  Loss and learning rate per iteration and validation recall per
          epoch, from OUTPUT_DIR/metrics.jsonl. One PNG.

Needs matplotlib (pip install 'tan[viz]').

Examples:
  tan-visualize scores --config-file configs/2dtan_synthetic.yaml --index 0 --index 7 --out pictures/
  tan-visualize scores --config-file configs/2dtan_synthetic.yaml --worst 4 --out pictures/
  tan-visualize curves --metrics outputs/synthetic --out pictures/curves.png
"""
import argparse
import os
import sys

from tan.data import ALL_SPLITS, RunData
from tan.engine.prediction import load_trained_model, predict_dataset_queries
from tan.errors import TanError
from tan.utils.io import read_json_lines
from tan.utils.logger import get_logger, setup_logger
from tan.utils.plots import draw_curves, draw_score_map, read_metrics
from tan_apps.cli.arguments import add_overrides
from tan_apps.cli.checkpoints import one_checkpoint
from tan_apps.cli import signal_exits
from tan_apps.cli.exit_codes import run_cli
from tan.engine.setup import EVALUATION_SPLITS, resolve_device


def build_parser():
    parser = argparse.ArgumentParser(description="Draw score maps or training curves as PNG files.",
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True, metavar="{scores,curves}")
    scores = commands.add_parser("scores", help="score maps and timelines of chosen queries",
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Example:\n  tan-visualize scores --config-file configs/2dtan_synthetic.yaml "
                                        "--index 0 --out pictures/")
    scores.add_argument("--config-file", default=None, metavar="FILE",
                        help="the config the model was trained with (default: the one stored in --ckpt)")
    scores.add_argument("--ckpt", default="", metavar="PATH",
                        help="checkpoint (default: the latest in --config-file's OUTPUT_DIR, else MODEL.WEIGHT)")
    scores.add_argument("--dataset", default="", metavar="NAME", help="dataset (default: the first of DATASETS.TEST)")
    scores.add_argument("--index", type=int, action="append", default=[], metavar="I",
                        help="query index in the dataset (the 'index' of predictions.jsonl); repeat for several")
    scores.add_argument("--worst", type=int, default=0, metavar="K",
                        help="also draw the K queries whose top moment overlaps the ground truth least "
                             "(read from the predictions tan-test wrote for the same checkpoint)")
    scores.add_argument("--topk", type=int, default=5, help="moments marked per query (default 5)")
    scores.add_argument("--out", required=True, metavar="DIR", help="folder for the PNG files")
    add_overrides(scores, "MODEL.DEVICE cpu")

    curves = commands.add_parser("curves", help="training curves from metrics.jsonl",
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Example:\n  tan-visualize curves --metrics outputs/synthetic --out curves.png")
    curves.add_argument("--metrics", required=True, metavar="PATH", help="OUTPUT_DIR or its metrics.jsonl")
    curves.add_argument("--out", required=True, metavar="FILE", help="PNG file to write")
    return parser


def worst_queries(results, dataset, count, checkpoint):
    """The ``count`` queries of ``dataset`` whose top moment overlaps the ground truth least,
    from tan-test's predictions of the same checkpoint (``results``: its results folder)."""
    path = os.path.join(results, dataset, "predictions.jsonl")
    if not os.path.isfile(path):
        raise TanError(f"--worst needs {path}, the predictions of {checkpoint}; run tan-test --ckpt {checkpoint} "
                       f"first (with the same --config-file and OUTPUT_DIR, if any)")
    records = read_json_lines(path, f"predictions file {path!r}")
    records.sort(key=lambda r: (r["ious"][0] if r["ious"] else 0.0, r["index"]))
    return [r["index"] for r in records[:count]]


def draw_queries(args):
    cfg, checkpoint, results = one_checkpoint(args.ckpt, args.config_file, args.opts)
    dataset_name = args.dataset or (cfg.DATASETS.TEST[0] if cfg.DATASETS.TEST else "")
    if not dataset_name:
        raise TanError("no dataset: pass --dataset NAME or set DATASETS.TEST")
    indices = list(dict.fromkeys(args.index + (worst_queries(results, dataset_name, args.worst, checkpoint) if args.worst else [])))
    if not indices:
        raise TanError("choose queries with --index I (repeatable) or --worst K")
    # A test dataset needs only the test files; another needs its run's whole vocabulary.
    dataset = RunData(cfg, splits=EVALUATION_SPLITS if dataset_name in cfg.DATASETS.TEST else ALL_SPLITS)
    dataset = dataset.dataset(dataset_name)
    bad = [i for i in indices if not 0 <= i < len(dataset)]
    if bad:
        raise TanError(f"--index {bad}: {dataset_name} has queries 0..{len(dataset) - 1}")
    device = resolve_device(cfg.MODEL.DEVICE)
    model = load_trained_model(cfg, checkpoint, device)
    os.makedirs(args.out, exist_ok=True)
    written = []
    for index, (picture, moments, kept_scores) in zip(indices, predict_dataset_queries(model, cfg, dataset, indices,
                                                                                       device, args.topk)):
        video = dataset.videos[dataset.video_ids[index]]
        path = os.path.join(args.out, f"{dataset_name}_{index:06d}.png")
        draw_score_map(path, picture, float(dataset.durations[index]),
                       tuple(float(x) for x in dataset.moments[index]), moments.tolist(), kept_scores.tolist(),
                       title=f'{video}: "{dataset.sentences[index]}"')
        written.append(path)
        get_logger("visualize").info("wrote %s", path)
    return written


def main(argv=None):
    args = build_parser().parse_args(argv)
    signal_exits.now_doing("drawing", "pictures already written are complete")
    setup_logger(None, stream=sys.stderr)
    if args.command == "curves":
        train, val = read_metrics(args.metrics)
        draw_curves(args.out, train, val)
        get_logger("visualize").info("wrote %s", args.out)
        return [args.out]
    return draw_queries(args)


def cli():
    run_cli(main)
