"""Check the data of a config before training on it.

For each dataset of DATASETS.TRAIN, VAL and TEST: the files found, the
queries kept and dropped (by reason), the videos without features, each
feature stream's width and lengths, and how much of the sentences the text
input covers. The datasets are built as training builds them, so the
counts are training's own. Then what the training datasets share with the
evaluation datasets: videos, identical queries (same video and sentence),
the same annotation file (training warns about these too). Exit status 0
when training can start, 1 when something would stop it (each such
problem is listed), 2 for a bad config; an overlap is reported, not fatal.

Examples:
  tan-check-data --config-file configs/lighthouse/2dtan_charades.yaml
  tan-check-data --config-file configs/2dtan_synthetic.yaml --json report.json
  tan-check-data --config-file my.yaml DATASETS.ROOT /data DATASETS.CATALOG my_catalog.yaml
"""
import argparse
import dataclasses
import json
import sys

from tan.config import load_config
from tan.data import RunData
from tan.data.check import check_overlaps, check_run, format_overlaps, format_report
from tan.utils.io import atomic_write_text
from tan.utils.logger import setup_logger
from tan_apps.cli.arguments import ConfigArgumentParser, add_overrides
from tan_apps.cli.exit_codes import run_cli

EXIT_PROBLEMS = 1


def build_parser():
    parser = ConfigArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config-file", required=True, metavar="FILE", help="YAML config of the run")
    parser.add_argument("--json", metavar="PATH", help="also write the report as JSON to PATH")
    add_overrides(parser, "DATASETS.ROOT /data")
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    setup_logger(None, stream=sys.stderr)  # the datasets' own log lines; the report goes to stdout
    cfg = load_config(args.config_file, args.opts)
    data = RunData(cfg)
    reports, problems = check_run(data)
    overlaps, unread = check_overlaps(data, reports)
    text, all_problems = format_report(reports, problems)
    print("\n".join([text] + format_overlaps(overlaps, unread)), flush=True)
    if args.json:
        record = {"config": args.config_file, "problems": all_problems,
                  "datasets": [dataclasses.asdict(r) for r in reports],
                  "overlaps": [dict(dataclasses.asdict(o), overlaps=o.overlaps) for o in overlaps],
                  "overlaps_not_checked": unread}  # datasets whose annotations could not be read
        atomic_write_text(args.json, json.dumps(record, indent=2, default=list) + "\n")
    if all_problems:
        sys.exit(EXIT_PROBLEMS)


def cli():
    run_cli(main)
