"""Which checkpoints a tool uses, with which config, and what their results are called.

``--ckpt`` takes files, folders (every checkpoint in them) and glob patterns.
A checkpoint saved by tan carries its config (docs/checkpoints.md §1), so it
needs no ``--config-file``; one without (the reference's, or a bare state
dict) needs one. Command-line KEY VALUE overrides apply either way.
"""
import glob
import os
from dataclasses import dataclass, field

from tan.config import load_config
from tan.config.setup import merge_overrides
from tan.config.stored import checkpoint_config
from tan.engine.checkpoints import default_checkpoint, progress_of_name
from tan.errors import TanError
from tan.utils.logger import get_logger
from tan.utils.checkpoint_file import BEST, FINAL, checkpoint_name
from tan_apps.cli.arguments import DEFAULT_CONFIG

def _order(path):
    """Epoch checkpoints in training order (model_{e}e_{it}it, saved during epoch e, before
    model_{e}e, saved at its end), then model_final, then model_best, then any other file by name."""
    name = os.path.basename(path)
    progress = progress_of_name(name)
    if progress is not None:
        return (0, progress, name)
    return (1, ({FINAL: 0, BEST: 1}.get(name, 2), 0), name)


def expand_checkpoints(specs):
    """Files, folders and glob patterns -> checkpoint paths, each once, in the order given
    (a folder's or a pattern's checkpoints by epoch, then final, then best)."""
    paths = []
    for spec in specs:
        if os.path.isdir(spec):
            found = sorted(glob.glob(os.path.join(glob.escape(spec), "*.pth")), key=_order)
            if not found:
                raise TanError(f"--ckpt {spec!r}: the folder holds no checkpoint (*.pth)")
        elif glob.has_magic(spec) and not os.path.exists(spec):
            found = sorted((p for p in glob.glob(spec) if os.path.isfile(p)), key=_order)
            if not found:
                raise TanError(f"--ckpt {spec!r}: no file matches the pattern")
        elif os.path.isfile(spec):
            found = [spec]
        else:
            raise TanError(f"--ckpt {spec!r}: checkpoint not found")
        paths.extend(found)
    unique = {}
    for path in paths:
        unique.setdefault(os.path.abspath(path), path)
    return list(unique.values())


def result_names(paths):
    """A short, distinct name per checkpoint for its results folder and its row of a
    comparison: the file name without .pth when the checkpoints share a folder,
    else the path from their common folder with "/" written "_"
    (run_a/model_best.pth -> run_a_model_best)."""
    if not paths:
        return []
    folders = {os.path.dirname(os.path.abspath(p)) for p in paths}
    if len(folders) == 1:
        names = [checkpoint_name(p) for p in paths]
    else:
        common = os.path.commonpath(sorted(folders))
        relative = [os.path.relpath(os.path.abspath(p), common) for p in paths]
        names = [os.path.join(os.path.dirname(r), checkpoint_name(r)).replace(os.sep, "_") for r in relative]
    clashes = sorted({n for n in names if names.count(n) > 1})
    if clashes:
        raise TanError(f"--ckpt: several checkpoints would be filed as {', '.join(clashes)}; rename one")
    return names


def output_dir_override(opts):
    """OUTPUT_DIR given on the command line, or None."""
    keys = list(opts[0::2])
    return opts[2 * keys.index("OUTPUT_DIR") + 1] if "OUTPUT_DIR" in keys and len(opts) % 2 == 0 else None


@dataclass
class Evaluation:
    """One checkpoint to evaluate ("" for an untrained model), its config and result name."""
    name: str
    checkpoint: str
    cfg: object


def _results_dir(paths, config_file, opts):
    """OUTPUT_DIR of the command line, else of --config-file, else the checkpoints' common folder."""
    results_dir = output_dir_override(opts)
    if results_dir is None and config_file:
        results_dir = load_config(config_file, opts).OUTPUT_DIR
    if results_dir is None:
        results_dir = os.path.commonpath([os.path.dirname(os.path.abspath(p)) for p in paths])
        if os.path.dirname(results_dir) == results_dir:  # only the file system's root in common
            raise TanError("the checkpoints share no folder to file their results in; give one: OUTPUT_DIR DIR")
        inside = os.path.relpath(results_dir)
        results_dir = results_dir if inside.startswith("..") else inside  # short names for folders below cwd
    return results_dir


KEEP_GOING_FLAG = "--keep-going"


@dataclass
class Plan:
    """What tan-test evaluates: where the results go, the evaluations, with ``--keep-going``
    the checkpoints left out ([(path, why)]), and what to warn about."""
    results_dir: str
    evaluations: list
    left_out: list
    warnings: list = field(default_factory=list)  # to log once logging is set up (a checkpoint fallen back on)

    def leave_out(self, path, error, keep_going, count):
        """Record checkpoint ``path``, which cannot be used (``error``), as left out with
        ``keep_going``; else stop, saying how to evaluate the others (of ``count``)."""
        if not keep_going:
            hint = f"; nothing was evaluated (pass {KEEP_GOING_FLAG} to evaluate the others)" if count > 1 else ""
            raise TanError(f"{error}{hint}") from None
        self.left_out.append((path, str(error)))


def plan_evaluations(specs, config_file, opts, keep_going=False):
    """The :class:`Plan` of tan-test.

    With --ckpt: each checkpoint with --config-file, else its own config;
    results under OUTPUT_DIR/inference/{name}/, where OUTPUT_DIR is the
    command line's, else --config-file's, else the checkpoints' common folder.
    Without --ckpt: the config's default checkpoint (:func:`default_checkpoint`),
    or an untrained model when there is none.

    A checkpoint that cannot be read stops the plan before anything is
    evaluated (a comparison that silently lacks a row misleads, and one that
    fails after hours of evaluation wastes them); with ``keep_going`` it is
    left out and the others are evaluated."""
    if not specs:
        cfg = load_config(config_file or DEFAULT_CONFIG, opts)
        checkpoint, warning = default_checkpoint(cfg.OUTPUT_DIR, cfg.MODEL.WEIGHT, cfg.MODEL.ARCHITECTURE)
        name = checkpoint_name(checkpoint) if checkpoint else "untrained"
        return Plan(cfg.OUTPUT_DIR, [Evaluation(name, checkpoint, cfg)], [], [warning] if warning else [])
    paths = expand_checkpoints(specs)
    names = result_names(paths)
    results_dir = _results_dir(paths, config_file, opts)
    opts = merge_overrides(opts, ["OUTPUT_DIR", results_dir])
    plan = Plan(results_dir, [], [])
    for name, path in zip(names, paths):
        try:
            plan.evaluations.append(Evaluation(name, path, checkpoint_config(path, config_file, opts)))
        except TanError as e:
            plan.leave_out(path, e, keep_going, len(paths))
    return plan


def one_checkpoint(ckpt, config_file, opts):
    """What tan-predict and tan-visualize use: (config, checkpoint, results folder of that
    checkpoint's tan-test run). ``ckpt`` "" means the default checkpoint of --config-file's run."""
    if ckpt:
        if not os.path.isfile(ckpt):
            raise TanError(f"--ckpt {ckpt!r}: checkpoint not found")
        cfg = checkpoint_config(ckpt, config_file, opts)
        return cfg, ckpt, os.path.join(_results_dir([ckpt], config_file, opts), "inference", checkpoint_name(ckpt))
    if not config_file:
        raise TanError("name the model: --ckpt PATH (a checkpoint saved by tan carries its config), "
                       "or --config-file FILE to use the latest checkpoint of its OUTPUT_DIR")
    cfg = load_config(config_file, opts)
    checkpoint, warning = default_checkpoint(cfg.OUTPUT_DIR, cfg.MODEL.WEIGHT, cfg.MODEL.ARCHITECTURE)
    if warning:
        get_logger("checkpoint").warning("%s", warning)
    if not checkpoint:
        raise TanError(f"no checkpoint in OUTPUT_DIR {cfg.OUTPUT_DIR!r} and no MODEL.WEIGHT; "
                       f"train first or pass --ckpt PATH")
    return cfg, checkpoint, os.path.join(cfg.OUTPUT_DIR, "inference", checkpoint_name(checkpoint))
