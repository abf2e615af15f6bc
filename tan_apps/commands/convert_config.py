"""Convert a reference code's experiment file into a tan config.

Every registered model is asked whether the file is one of its reference's
(docs/models.md §2, ``from_foreign_config``); the one that recognises it
writes the settings. The config is written to --out, with the dataset
catalog it needs beside it (OUT stem + "_catalog.yaml") when the reference
reads its data from its own layout; then it is loaded as training would
load it, so a converted file that tan would refuse is never left behind.
What the conversion could not carry over is listed at the top of the file.
The written config evaluates as the reference does, every video whole
(TEST.WINDOW.IN_EVALUATION False), unless the model's converter says otherwise.

Examples:
  tan-convert-config reference/experiments/charades/EXPERIMENT.yaml --out my_charades.yaml \\
      --data-root reference/data/Charades-STA
  tan-convert-config reference/experiments/tacos/EXPERIMENT.yaml --out my_tacos.yaml
"""
import argparse
import os
import sys

import yaml

from tan.config import load_config
from tan.config.experiment_file import DEFAULTS_TAKEN, ExperimentFile
from tan.config.models import MODELS
from tan.config.plugins import load_plugins
from tan.errors import TanError
from tan.utils.io import atomic_write_text
from tan.utils.logger import get_logger, setup_logger
from tan.utils.yaml_files import read_yaml_file
from tan_apps.cli.exit_codes import run_cli


def build_parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", metavar="FILE", help="the reference's experiment YAML file")
    parser.add_argument("--out", required=True, metavar="FILE", help="the tan config to write")
    parser.add_argument("--data-root", metavar="DIR",
                        help="DATASETS.ROOT of the written config: the folder of the reference's data "
                             "(default: the data folder the experiment file names)")
    parser.add_argument("--plugin", action="append", default=[], metavar="MODULE",
                        help="a plug-in whose models may recognise the file (repeatable)")
    return parser


def recognise(data, path):
    """(model name, ForeignConfig) of the one registered model that recognises ``data``."""
    found = []
    for name in MODELS.names():
        try:
            converted = MODELS.get(name).from_foreign_config(ExperimentFile.of(data), path)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as error:
            # a file of the model's reference with a key missing or of the wrong kind
            what = f"key {error.args[0]!r} is missing" if isinstance(error, KeyError) else str(error)
            raise TanError(f"{path}: an experiment file of model {name}'s reference, but {what} "
                           f"({type(error).__name__}); compare it with the reference's own files") from None
        if converted is not None:
            found.append((name, converted))
    if not found:
        raise TanError(f"{path}: no registered model recognises this experiment file (models: "
                       f"{', '.join(MODELS.names())}; a plug-in's model needs --plugin MODULE)")
    if len(found) > 1:
        raise TanError(f"{path}: several models recognise this file ({', '.join(n for n, _ in found)})")
    return found[0]


def with_root(config, root):
    """``config`` with DATASETS.ROOT set to ``root`` (when given)."""
    if root:
        config = dict(config, DATASETS=dict(config.get("DATASETS", {}), ROOT=os.path.abspath(root)))
    return config


# What every reference's evaluation does, which tan's evaluation does only when told.
EVALUATED_WHOLE = ("TEST.WINDOW.IN_EVALUATION False: tan-test and the periodic evaluation score every video "
                   "whole, as the reference evaluates (tan-predict, the API and the demo still window videos "
                   "longer than the training ones; docs/long_videos.md)")


def evaluated_as_the_reference(config, notes):
    """(``config``, ``notes``) with the evaluation the reference runs: every video scored whole
    (TEST.WINDOW.IN_EVALUATION False), unless the converter chose windows itself."""
    test = dict(config.get("TEST") or {})
    window = dict(test.get("WINDOW") or {})
    if "IN_EVALUATION" in window:
        return config, notes
    window["IN_EVALUATION"] = False
    return dict(config, TEST=dict(test, WINDOW=window)), (*notes, EVALUATED_WHOLE)


def header(path, name, notes):
    lines = [f"Converted by tan-convert-config from {path} (model {name})."]
    lines += [f"Note: {note}" for note in notes]
    return "".join(f"# {line}\n" for line in lines)


def main(argv=None):
    args = build_parser().parse_args(argv)
    setup_logger(None, stream=sys.stderr)
    load_plugins(args.plugin, "--plugin")
    data = read_yaml_file(args.file, f"experiment file {args.file!r}")
    if not isinstance(data, dict):
        raise TanError(f"{args.file}: expected a mapping of settings at the top, got {type(data).__name__}")
    name, converted = recognise(data, args.file)
    config, notes = evaluated_as_the_reference(with_root(converted.config, args.data_root), tuple(converted.notes))
    converted = converted._replace(notes=notes)
    if args.plugin:
        config = dict(config, PLUGINS=list(args.plugin))
    out = os.path.abspath(args.out)
    catalog_path = None
    if converted.catalog:
        catalog_path = os.path.splitext(out)[0] + "_catalog.yaml"
        config = dict(config, DATASETS=dict(config.get("DATASETS", {}), CATALOG=catalog_path))
    text = header(args.file, name, converted.notes) + yaml.safe_dump(config, sort_keys=False)
    if catalog_path:
        atomic_write_text(catalog_path, f"# Datasets of {os.path.basename(out)}, in the reference's layout.\n"
                          + yaml.safe_dump(converted.catalog, sort_keys=False))
    atomic_write_text(out, text)
    try:
        load_config(out)
    except TanError as error:  # never leave a config behind that tan refuses
        for path in filter(None, (out, catalog_path)):
            os.remove(path)
        taken = "".join(f"; {note}" for note in converted.notes if note.startswith(DEFAULTS_TAKEN))
        raise TanError(f"{args.file}: the converted config does not load ({error}){taken}") from None
    logger = get_logger("convert")
    logger.info("wrote %s%s (model %s)", out, f" and {catalog_path}" if catalog_path else "", name)
    for note in converted.notes:
        logger.info("note: %s", note)
    return out


def cli():
    run_cli(main)
