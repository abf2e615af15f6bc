"""Config assembly: defaults <- YAML file <- command-line ``KEY VALUE`` pairs.

yacs alone reports unknown keys and bad types with terse messages (and an
odd-length override list as a bare assertion); here every mistake becomes a
:class:`TanError` naming the key, and for unknown keys the closest valid ones.
"""
import ast
import difflib
import math

from yacs.config import CfgNode

from ..errors import TanError
from ..utils.io import atomic_write_text, read_named_text
from ..utils.yaml_files import parse_yaml
from .checks import is_int, run_config_checks
from .choices import AMP_MODES, NMS_UNITS
from .defaults import _C
from .models import MODELS, default_model, model_class, need
from .plugins import load_plugins


def get_cfg_defaults(plugins=(), source="PLUGINS"):
    """A fresh, mutable copy of the defaults: the core's keys and those of every
    registered model, after importing the plug-ins ``plugins`` (module names or paths;
    ``source`` names where they were given, for errors)."""
    load_plugins(plugins, source)
    cfg = _C.clone()
    cfg.MODEL.ARCHITECTURE = default_model()
    for name in MODELS.names():
        MODELS.get(name).add_config(cfg)
    return cfg


def _all_keys(node, prefix=""):
    keys = []
    for name, value in node.items():
        full = prefix + name
        keys.append(full)
        if isinstance(value, CfgNode):
            keys.extend(_all_keys(value, full + "."))
    return keys


def _unknown_key_error(key, source, defaults, section=False):
    """``section``: the key is given a mapping of keys (a section), not a value."""
    parts = key.split(".")
    subtree = len(parts) > 2 or (len(parts) == 2 and section)  # MODEL.X.KEY, or MODEL.X as a section
    if subtree and parts[0] == "MODEL" and parts[1] not in defaults.MODEL \
            and not difflib.get_close_matches(parts[1], list(defaults.MODEL), n=1, cutoff=0.6):
        return TanError(f"{source}: unknown config key {key!r}: MODEL.{parts[1]} holds the settings of a model "
                        f"{parts[1]!r}, and none is registered under that name; registered: "
                        f"{', '.join(MODELS.names())} (a model of a plug-in needs its module in PLUGINS)")
    valid = _all_keys(defaults)
    close = difflib.get_close_matches(key, valid, n=3, cutoff=0.5)
    if not close:  # a typo in the last part only: compare leaf names
        leaf = key.rsplit(".", 1)[-1]
        close = [k for k in valid if difflib.get_close_matches(leaf, [k.rsplit(".", 1)[-1]], cutoff=0.7)][:3]
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return TanError(f"{source}: unknown config key {key!r}{hint}")


def _check_keys(node, defaults, source, prefix="", root=None):
    root = defaults if root is None else root
    for name, value in node.items():
        full = prefix + name
        if name not in defaults:
            raise _unknown_key_error(full, source, root, section=isinstance(value, dict))
        if isinstance(value, dict):
            if not isinstance(defaults[name], CfgNode):
                raise TanError(f"{source}: {full} is a value ({defaults[name]!r}), not a section")
            _check_keys(value, defaults[name], source, full + ".", root)
        elif isinstance(defaults[name], CfgNode):
            raise TanError(f"{source}: {full} is a section; give its keys, e.g. {full}.{next(iter(defaults[name]))}")


def _merge(cfg, other, source):
    try:
        cfg.merge_from_other_cfg(other)
    except (ValueError, KeyError, AssertionError) as e:
        raise TanError(f"{source}: {e}") from None


def _read_yaml(text, source):
    """The top-level mapping of a YAML config (None when empty)."""
    data = parse_yaml(text, source)
    if data is not None and not isinstance(data, dict):
        raise TanError(f"{source}: expected a mapping of keys at the top level, got {type(data).__name__}")
    return data


def _merge_yaml(cfg, data, source, defaults):
    if data is None:
        return
    _check_keys(data, defaults, source)
    _merge(cfg, CfgNode(_floats_where_expected(data, defaults)), source)


def _plugins_named(data, opts, source):
    """What PLUGINS names (in the ``opts`` pairs, else in the YAML ``data``), to import before
    the rest is read: the keys of a plug-in's model exist only once it is imported."""
    named = []
    if data and "PLUGINS" in data:
        named.append((data["PLUGINS"], f"{source}: PLUGINS"))
    for key, value in _override_pairs(opts):
        if key == "PLUGINS":
            named.append((_literal(value) if isinstance(value, str) else value, "command line: PLUGINS"))
    if not named:
        return [], "PLUGINS"
    value, where = named[-1]  # as for any key, the command line's value replaces the file's
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
        raise TanError(f"{where}: expected a list of module names or paths, got {value!r}")
    return list(value), where


def _floats_where_expected(data, defaults):
    """``data`` with whole numbers given for float keys made floats (``LR: 1``,
    ``SOLVER.LR -1``): yacs would refuse them as a type mismatch, and the
    range checks below say what is wrong with the value itself."""
    out = {}
    for name, value in data.items():
        default = defaults[name]
        if isinstance(value, dict):
            value = _floats_where_expected(value, default)
        elif isinstance(default, float) and is_int(value):
            value = float(value)
        out[name] = value
    return out


def _literal(text):
    """A command-line value as yacs reads it: a Python literal, else the string itself."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def _override_pairs(opts):
    """The command line's KEY VALUE pairs [(key, value)]; an odd count or a key given twice is an
    error (last-one-wins would drop the first without a word, as a YAML file's second key would)."""
    opts = list(opts)
    if len(opts) % 2:
        raise TanError(
            f"command-line overrides must be KEY VALUE pairs; got an odd number ({len(opts)}): "
            f"{' '.join(map(str, opts))}; the last key without a value is {opts[-1]!r}"
        )
    pairs = list(zip(opts[0::2], opts[1::2]))
    first = {}
    for number, (key, value) in enumerate(pairs, 1):
        if key in first:
            earlier = first[key]
            raise TanError(f"command line: {key} is given twice, as override {earlier} ({key} "
                           f"{pairs[earlier - 1][1]}) and override {number} ({key} {value}) of the KEY VALUE pairs; "
                           f"the second would replace the first without a word; give it once")
        first[key] = number
    return pairs


def merge_overrides(opts, *more):
    """``opts`` (KEY VALUE pairs) with the pairs of each of ``more`` set on top: a key ``opts`` gives
    has its value replaced, a new one is appended. What a program adds to the overrides it was given
    (a tool's own OUTPUT_DIR, a preset under the user's), since a list of overrides may not give a
    key twice."""
    opts = list(opts)
    for extra in more:
        extra = list(extra)
        for key, value in zip(extra[0::2], extra[1::2]):
            keys = opts[0::2]
            if key in keys:
                opts[2 * keys.index(key) + 1] = value
            else:
                opts += [key, value]
    return opts


def _type_name(default):
    if isinstance(default, bool):
        return "True or False"
    if is_int(default):
        return "a whole number"
    if isinstance(default, float):
        return "a number"
    if isinstance(default, (list, tuple)):
        return "a list"
    return f"a {type(default).__name__}"


def _override_value(key, value, default):
    """The value of ``key`` that the command line's ``value`` (a string as typed, or a value given by a
    program) stands for, of the default's type; an error that says how to write it otherwise."""
    typed = _literal(value) if isinstance(value, str) else value
    if isinstance(default, str):
        # OUTPUT_DIR 2024 is the folder "2024"; a quoted one (OUTPUT_DIR "'runs/a'") is unquoted, as yacs does
        return typed if isinstance(typed, str) or not isinstance(value, str) else value
    if isinstance(default, float) and is_int(typed):
        return float(typed)  # as for YAML (_floats_where_expected)
    if isinstance(default, tuple) and isinstance(typed, list):
        return tuple(typed)
    if isinstance(default, list) and isinstance(typed, tuple):
        return list(typed)
    if type(typed) is type(default):
        return typed
    hint = ""
    if isinstance(default, (list, tuple)):
        hint = (f"; write a list as Python does and quote it for the shell, e.g. {key} \"{_list_example(default, key)}\" "
                f"(one item: \"{_list_example(default, key, 1)}\"; none: \"()\")")
    elif isinstance(default, bool):
        hint = "; write True or False"
    raise TanError(f"command line: {key} expects {_type_name(default)} (default {default!r}), got {value!r}{hint}")


# Keys whose lists hold names (empty by default, so their default shows no item to follow).
NAME_LISTS = ("DATASETS.", "PLUGINS")


def _list_example(default, key="", count=2):
    items = list(default)[:count] or (["name_a", "name_b"] if key.startswith(NAME_LISTS) else [10, 20])[:count]
    return "(" + ", ".join(repr(i) for i in items) + ("," if len(items) == 1 else "") + ")"


def _merge_overrides(cfg, opts, defaults):
    """The command line's pairs set one by one, each checked for its key and type (yacs' own
    merge would decode the values a second time and word a type mismatch with values that print alike)."""
    valid = set(_all_keys(defaults))
    for key, value in _override_pairs(opts):
        if key not in valid:
            raise _unknown_key_error(key, "command line", defaults)
        default = value_at(defaults, key)
        if isinstance(default, CfgNode):
            raise TanError(f"command line: {key} is a section, not a key")
        parent, _, leaf = key.rpartition(".")
        value_at(cfg, parent)[leaf] = _override_value(key, value, default)


# The largest whole number a key may hold: what a 32-bit index, a seed and a duration of the log's clock all take.
# A count beyond it is a typo (10^30 epochs), and would fail only once the run has started writing.
INT_LIMIT = 2 ** 31 - 1


def _check_numbers(node, prefix=""):
    """Every whole number of the config within +-INT_LIMIT, every float finite (1e999 reads as inf)."""
    for name, value in node.items():
        key = prefix + name
        if isinstance(value, CfgNode):
            _check_numbers(value, key + ".")
        elif is_int(value):
            need(abs(value) <= INT_LIMIT, key, f"expected a whole number of at most {INT_LIMIT} in size, got {value}")
        elif isinstance(value, float):
            need(math.isfinite(value), key, f"expected a finite number, got {value}")
        elif isinstance(value, (list, tuple)):
            for item in value:
                need(not is_int(item) or abs(item) <= INT_LIMIT, key,
                     f"expected whole numbers of at most {INT_LIMIT} in size, got {item}")
                need(not isinstance(item, float) or math.isfinite(item), key, f"expected finite numbers, got {item}")


def _check_counts(cfg):
    """Sizes and counts: positive integers, or integers >= 0 where 0 means "off"."""
    for key, value in [
        ("INPUT.NUM_PRE_CLIPS", cfg.INPUT.NUM_PRE_CLIPS),
        ("INPUT.PRE_QUERY_SIZE", cfg.INPUT.PRE_QUERY_SIZE),
        ("SOLVER.MAX_EPOCH", cfg.SOLVER.MAX_EPOCH), ("SOLVER.BATCH_SIZE", cfg.SOLVER.BATCH_SIZE),
        ("TEST.BATCH_SIZE", cfg.TEST.BATCH_SIZE), ("SOLVER.LOG_PERIOD", cfg.SOLVER.LOG_PERIOD),
        ("DISTRIBUTED.TIMEOUT", cfg.DISTRIBUTED.TIMEOUT),
    ]:
        need(is_int(value) and value > 0, key, f"expected a positive integer, got {value!r}")
    for key, value in [
        ("SOLVER.CHECKPOINT_PERIOD", cfg.SOLVER.CHECKPOINT_PERIOD), ("SOLVER.TEST_PERIOD", cfg.SOLVER.TEST_PERIOD),
        ("SOLVER.ITERS_PER_EPOCH", cfg.SOLVER.ITERS_PER_EPOCH),
        ("DATALOADER.NUM_WORKERS", cfg.DATALOADER.NUM_WORKERS), ("INPUT.FEATURE_CACHE_SIZE", cfg.INPUT.FEATURE_CACHE_SIZE),
        ("SOLVER.SKIP_TEST", cfg.SOLVER.SKIP_TEST),
        ("DATALOADER.SENTENCES_PER_VIDEO", cfg.DATALOADER.SENTENCES_PER_VIDEO),
    ]:
        need(is_int(value) and value >= 0, key, f"expected an integer >= 0, got {value!r}")
    for key, limit in COUNT_LIMITS.items():
        value = value_at(cfg, key)
        need(value <= limit, key, f"expected at most {limit}, got {value} (a count this large is a typo: "
                                  f"{COUNT_LIMITS_WHY[key]})")


# Counts with a bound of their own, far below INT_LIMIT: beyond these, a value cannot be meant, and would
# fail only once the work has begun (a process per worker, a map of that many clips, a batch in memory).
COUNT_LIMITS = {"DATALOADER.NUM_WORKERS": 1024, "INPUT.NUM_PRE_CLIPS": 65536, "INPUT.PRE_QUERY_SIZE": 65536,
                "SOLVER.BATCH_SIZE": 1 << 20, "TEST.BATCH_SIZE": 1 << 20, "SOLVER.MAX_EPOCH": 1_000_000}
COUNT_LIMITS_WHY = {
    "DATALOADER.NUM_WORKERS": "each worker is a process; a machine has fewer cores",
    "INPUT.NUM_PRE_CLIPS": "each video is resampled to that many clips in memory",
    "INPUT.PRE_QUERY_SIZE": "the width of a word or sentence vector",
    "SOLVER.BATCH_SIZE": "the queries of one step, in memory at once",
    "TEST.BATCH_SIZE": "the queries of one step, in memory at once",
    "SOLVER.MAX_EPOCH": "passes over the training data",
}


def _check_values(cfg):
    """Ranges, orders and choices."""
    need(0.0 <= cfg.TEST.NMS_THRESH <= 1.0, "TEST.NMS_THRESH", f"expected a value in [0, 1], got {cfg.TEST.NMS_THRESH}")
    need(cfg.TEST.NMS_UNITS in NMS_UNITS, "TEST.NMS_UNITS",
         f"expected {' or '.join(repr(u) for u in NMS_UNITS)}, got {cfg.TEST.NMS_UNITS!r}")
    need(cfg.SOLVER.LR > 0, "SOLVER.LR", f"expected a positive learning rate, got {cfg.SOLVER.LR}")
    milestones = list(cfg.SOLVER.MILESTONES)
    need(all(is_int(m) and m > 0 for m in milestones) and milestones == sorted(milestones), "SOLVER.MILESTONES",
         f"expected increasing positive epoch numbers, got {milestones}")
    _check_solver(cfg)
    for key in ("TRAIN", "VAL", "TEST"):
        names = cfg.DATASETS[key]
        need(all(isinstance(x, str) and x for x in names), f"DATASETS.{key}",
             f"expected a list of dataset names, got {names!r}")
    need(cfg.SOLVER.AMP in AMP_MODES, "SOLVER.AMP",
         f"expected {', '.join(repr(m) for m in AMP_MODES[:-1])} or {AMP_MODES[-1]!r}, got {cfg.SOLVER.AMP!r}")
    need(0.0 <= cfg.INPUT.FEATURE_LENGTH_TOLERANCE < 1.0, "INPUT.FEATURE_LENGTH_TOLERANCE",
         f"expected a fraction in [0, 1), got {cfg.INPUT.FEATURE_LENGTH_TOLERANCE}")
    device = cfg.MODEL.DEVICE
    need(device in ("auto", "cpu", "cuda") or (device.startswith("cuda:") and device[5:].isdigit()),
         "MODEL.DEVICE", f"expected 'auto', 'cpu', 'cuda' or 'cuda:N', got {device!r}")


def _check_solver(cfg):
    """The solver's numbers (its names are checked against the registries by tan.solver.check_names)."""
    solver = cfg.SOLVER
    need(solver.MOMENTUM >= 0, "SOLVER.MOMENTUM", f"expected a value >= 0, got {solver.MOMENTUM}")
    need(solver.GAMMA > 0, "SOLVER.GAMMA", f"expected a positive factor, got {solver.GAMMA}")
    need(0.0 <= solver.END_LR_FACTOR <= 1.0, "SOLVER.END_LR_FACTOR",
         f"expected a fraction in [0, 1], got {solver.END_LR_FACTOR}")
    need(is_int(solver.WARMUP_ITERS) and solver.WARMUP_ITERS >= 0, "SOLVER.WARMUP_ITERS",
         f"expected a whole number >= 0, got {solver.WARMUP_ITERS!r}")
    need(0.0 < solver.WARMUP_FACTOR <= 1.0, "SOLVER.WARMUP_FACTOR",
         f"expected a factor in (0, 1], got {solver.WARMUP_FACTOR}")


def _differences(node, default, prefix):
    for name, value in node.items():
        if isinstance(value, CfgNode):
            yield from _differences(value, default[name], f"{prefix}.{name}")
        elif value != default[name]:
            yield f"{prefix}.{name}"


def _inactive_keys(cfg):
    """(key, model) of every key of ``cfg`` that a registered model other than the run's owns
    (a key outside the subtrees that the run's model declares too is the run's)."""
    own = set(model_class(cfg).KEYS_OUTSIDE)
    for name in MODELS.names():
        if name == cfg.MODEL.ARCHITECTURE:
            continue
        for key in MODELS.get(name).KEYS_OUTSIDE:
            if key not in own and _has_key(cfg, key):
                yield key, name
        if name in cfg.MODEL:
            yield f"MODEL.{name}", name


def value_at(node, key):
    """The value (or section) of dotted ``key`` in config ``node``: value_at(cfg, "SOLVER.LR");
    "" is ``node`` itself."""
    for part in key.split(".") if key else ():
        node = node[part]
    return node


def _check_inactive_settings(cfg, defaults):
    """Settings of a model the run does not use would be ignored without a word: refuse them."""
    for key, name in _inactive_keys(cfg):
        if not _has_key(defaults, key):
            continue
        value, default = value_at(cfg, key), value_at(defaults, key)
        changed = (list(_differences(value, default, key)) if isinstance(value, CfgNode)
                   else [key] if value != default else [])
        if changed:
            key = changed[0]
            relative = key.split(".", 2)[2] if key.startswith(f"MODEL.{name}.") else None
            hint = (f"; set MODEL.{cfg.MODEL.ARCHITECTURE}.{relative} instead"
                    if relative and _has_key(cfg.MODEL.get(cfg.MODEL.ARCHITECTURE), relative) else "")
            reads = f"reads MODEL.{cfg.MODEL.ARCHITECTURE} only" if relative else f"does not read it ({name} does)"
            raise TanError(f"config key {key} is set, but MODEL.ARCHITECTURE is {cfg.MODEL.ARCHITECTURE!r}, which "
                           f"{reads}{hint}")


def _without_inactive_settings(cfg, defaults):
    """``cfg`` without the (default) settings of the models it does not use: a run's config.yml
    holds its own model's keys, and loads where other plug-ins are not installed."""
    for key, _ in list(_inactive_keys(cfg)):
        parent, _, leaf = key.rpartition(".")
        del value_at(cfg, parent)[leaf]
    return cfg


def _has_key(node, dotted):
    for part in dotted.split("."):
        if not isinstance(node, CfgNode) or part not in node:
            return False
        node = node[part]
    return True


def validate_config(cfg, defaults=None):
    """Reject values that are of the right type but cannot work together: the core's
    settings here, the model's by its ``validate_config``. ``defaults``: those ``cfg`` was
    merged into (default: today's)."""
    defaults = defaults if defaults is not None else get_cfg_defaults(cfg.PLUGINS)
    model = model_class(cfg)
    _check_numbers(cfg)
    _check_inactive_settings(cfg, defaults)
    # the model's own settings first, as they came first when each model's checks were here
    model.validate_config(cfg)
    _check_counts(cfg)
    _check_values(cfg)
    run_config_checks(cfg)  # those the features declare where they live (tan/config/checks.py)


def _assemble(data, source, opts, freeze, plugins=None):
    """Defaults (with the plug-ins that ``data`` or ``opts`` name, or ``plugins`` instead),
    then the YAML mapping ``data``, then ``opts`` pairs; validated, and without the settings
    of models the run does not use."""
    named, where = _plugins_named(data, opts, source)
    if plugins is not None:
        named, where = list(plugins), "PLUGINS"
    cfg = get_cfg_defaults(named, where)
    defaults = cfg.clone()
    _merge_yaml(cfg, data, source, defaults)
    _merge_overrides(cfg, opts, defaults)
    validate_config(cfg, defaults)
    _without_inactive_settings(cfg, defaults)
    if freeze:
        cfg.freeze()
    return cfg


def load_config(config_file=None, opts=(), freeze=True, plugins=None):
    """Defaults, then ``config_file`` (if given), then ``opts`` pairs; validated.

    ``plugins``: the plug-ins to import instead of those the file and ``opts`` name (a run
    folder's config.yml read with the current run's plug-ins: its own may have moved); the
    config's PLUGINS still says what the file says."""
    data = None
    source = "command line"
    if config_file:
        source = f"config file {config_file!r}"
        data = _read_yaml(read_named_text(config_file, source), source)
    return _assemble(data, source, opts, freeze, plugins)


def load_config_text(text, source, opts=(), freeze=True):
    """Defaults, then the YAML ``text`` (a config stored in a checkpoint; ``source``
    names it in errors), then ``opts`` pairs; validated."""
    return _assemble(_read_yaml(text, source), source, opts, freeze)


def save_config(cfg, path):
    """Write the merged config as YAML that :func:`load_config` reads back."""
    atomic_write_text(path, cfg.dump())
