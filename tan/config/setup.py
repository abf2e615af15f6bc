"""Config assembly: defaults <- YAML file <- command-line ``KEY VALUE`` pairs.

yacs alone reports unknown keys and bad types with terse messages (and an
odd-length override list as a bare assertion); here every mistake becomes a
:class:`TanError` naming the key, and for unknown keys the closest valid ones.
"""
import ast
import difflib

from yacs.config import CfgNode

from ..errors import TanError
from ..utils.io import atomic_write_text, read_named_text
from ..utils.yaml_files import parse_yaml
from .architecture import ARCHITECTURES, FEAT2D_NAMES, TEXT_ENCODERS, model_key, model_settings
from .choices import AMP_MODES, NMS_UNITS, metric_names
from .defaults import _C


def get_cfg_defaults():
    """A fresh, mutable copy of the defaults."""
    return _C.clone()


def _all_keys(node, prefix=""):
    keys = []
    for name, value in node.items():
        full = prefix + name
        keys.append(full)
        if isinstance(value, CfgNode):
            keys.extend(_all_keys(value, full + "."))
    return keys


def _unknown_key_error(key, source):
    valid = _all_keys(_C)
    close = difflib.get_close_matches(key, valid, n=3, cutoff=0.5)
    if not close:  # a typo in the last part only: compare leaf names
        leaf = key.rsplit(".", 1)[-1]
        close = [k for k in valid if difflib.get_close_matches(leaf, [k.rsplit(".", 1)[-1]], cutoff=0.7)][:3]
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return TanError(f"{source}: unknown config key {key!r}{hint}")


def _check_keys(node, defaults, source, prefix=""):
    for name, value in node.items():
        full = prefix + name
        if name not in defaults:
            raise _unknown_key_error(full, source)
        if isinstance(value, dict):
            if not isinstance(defaults[name], CfgNode):
                raise TanError(f"{source}: {full} is a value ({defaults[name]!r}), not a section")
            _check_keys(value, defaults[name], source, full + ".")
        elif isinstance(defaults[name], CfgNode):
            raise TanError(f"{source}: {full} is a section; give its keys, e.g. {full}.{next(iter(defaults[name]))}")


def _merge(cfg, other, source):
    try:
        cfg.merge_from_other_cfg(other)
    except (ValueError, KeyError, AssertionError) as e:
        raise TanError(f"{source}: {e}") from None


def _merge_file(cfg, path):
    source = f"config file {path!r}"
    _merge_yaml(cfg, read_named_text(path, source), source)


def _merge_yaml(cfg, text, source):
    data = parse_yaml(text, source)
    if data is None:
        return
    if not isinstance(data, dict):
        raise TanError(f"{source}: expected a mapping of keys at the top level, got {type(data).__name__}")
    _check_keys(data, _C, source)
    _merge(cfg, CfgNode(_floats_where_expected(data, _C)), source)


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _floats_where_expected(data, defaults):
    """``data`` with whole numbers given for float keys made floats (``LR: 1``,
    ``SOLVER.LR -1``): yacs would refuse them as a type mismatch, and the
    range checks below say what is wrong with the value itself."""
    out = {}
    for name, value in data.items():
        default = defaults[name]
        if isinstance(value, dict):
            value = _floats_where_expected(value, default)
        elif isinstance(default, float) and _is_int(value):
            value = float(value)
        out[name] = value
    return out


def _literal(text):
    """A command-line value as yacs reads it: a Python literal, else the string itself."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def _merge_overrides(cfg, opts):
    opts = list(opts)
    if len(opts) % 2:
        raise TanError(
            f"command-line overrides must be KEY VALUE pairs; got an odd number ({len(opts)}): "
            f"{' '.join(opts)}; the last key without a value is {opts[-1]!r}"
        )
    valid = set(_all_keys(_C))
    for k in range(0, len(opts), 2):
        key, value = opts[k], opts[k + 1]
        if key not in valid:
            raise _unknown_key_error(key, "command line")
        node = _C
        for part in key.split("."):
            node = node[part]
        if isinstance(node, CfgNode):
            raise TanError(f"command line: {key} is a section, not a key")
        literal = _literal(value) if isinstance(node, float) and isinstance(value, str) else None
        if _is_int(literal):
            opts[k + 1] = repr(float(literal))  # as for YAML (_floats_where_expected)
    try:
        cfg.merge_from_list(opts)
    except (ValueError, KeyError, AssertionError) as e:
        raise TanError(f"command line: {e}") from None


def _need(cond, key, msg):
    if not cond:
        raise TanError(f"config key {key}: {msg}")


def _check_counts(cfg):
    """Sizes and counts: positive integers, or integers >= 0 where 0 means "off"."""
    arch = model_settings(cfg)
    own = [("NUM_CLIPS", arch.NUM_CLIPS), ("FEATPOOL.INPUT_SIZE", arch.FEATPOOL.INPUT_SIZE),
           ("FEATPOOL.HIDDEN_SIZE", arch.FEATPOOL.HIDDEN_SIZE), ("FEATPOOL.KERNEL_SIZE", arch.FEATPOOL.KERNEL_SIZE),
           ("PREDICTOR.HIDDEN_SIZE", arch.PREDICTOR.HIDDEN_SIZE), ("PREDICTOR.KERNEL_SIZE", arch.PREDICTOR.KERNEL_SIZE),
           ("PREDICTOR.NUM_STACK_LAYERS", arch.PREDICTOR.NUM_STACK_LAYERS)]
    if cfg.MODEL.ARCHITECTURE == "TAN":
        own += [("INTEGRATOR.QUERY_HIDDEN_SIZE", arch.INTEGRATOR.QUERY_HIDDEN_SIZE),
                ("INTEGRATOR.LSTM.NUM_LAYERS", arch.INTEGRATOR.LSTM.NUM_LAYERS)]
    else:
        own += [("JOINT_SPACE_SIZE", arch.JOINT_SPACE_SIZE), ("LOSS.NUM_POSTIVE_VIDEO_PROPOSAL",
                                                              arch.LOSS.NUM_POSTIVE_VIDEO_PROPOSAL),
                ("TEXT_ENCODER.LSTM.HIDDEN_SIZE", arch.TEXT_ENCODER.LSTM.HIDDEN_SIZE),
                ("TEXT_ENCODER.LSTM.NUM_LAYERS", arch.TEXT_ENCODER.LSTM.NUM_LAYERS)]
    for key, value in [(model_key(cfg, k), v) for k, v in own] + [
        ("INPUT.NUM_PRE_CLIPS", cfg.INPUT.NUM_PRE_CLIPS),
        ("INPUT.PRE_QUERY_SIZE", cfg.INPUT.PRE_QUERY_SIZE),
        ("SOLVER.MAX_EPOCH", cfg.SOLVER.MAX_EPOCH), ("SOLVER.BATCH_SIZE", cfg.SOLVER.BATCH_SIZE),
        ("TEST.BATCH_SIZE", cfg.TEST.BATCH_SIZE), ("SOLVER.LOG_PERIOD", cfg.SOLVER.LOG_PERIOD),
        ("DISTRIBUTED.TIMEOUT", cfg.DISTRIBUTED.TIMEOUT),
    ]:
        _need(_is_int(value) and value > 0, key, f"expected a positive integer, got {value!r}")
    for key, value in [
        ("SOLVER.CHECKPOINT_PERIOD", cfg.SOLVER.CHECKPOINT_PERIOD), ("SOLVER.TEST_PERIOD", cfg.SOLVER.TEST_PERIOD),
        ("SOLVER.ITERS_PER_EPOCH", cfg.SOLVER.ITERS_PER_EPOCH),
        ("MODEL.TAN.PREDICTOR.STRIP_ROWS", cfg.MODEL.TAN.PREDICTOR.STRIP_ROWS),
        ("MODEL.MMN.PREDICTOR.STRIP_ROWS", cfg.MODEL.MMN.PREDICTOR.STRIP_ROWS),
        ("DATALOADER.NUM_WORKERS", cfg.DATALOADER.NUM_WORKERS), ("INPUT.FEATURE_CACHE_SIZE", cfg.INPUT.FEATURE_CACHE_SIZE),
        ("SOLVER.FREEZE_BERT", cfg.SOLVER.FREEZE_BERT), ("SOLVER.ONLY_IOU", cfg.SOLVER.ONLY_IOU),
        ("SOLVER.SKIP_TEST", cfg.SOLVER.SKIP_TEST),
        ("DATALOADER.SENTENCES_PER_VIDEO", cfg.DATALOADER.SENTENCES_PER_VIDEO),
    ]:
        _need(_is_int(value) and value >= 0, key, f"expected an integer >= 0, got {value!r}")


def _check_map_geometry(cfg):
    """Pooling, the 2D map and the conv stack must fit together (docs/model.md §2, §3, §5)."""
    arch, key = model_settings(cfg), (lambda k: model_key(cfg, k))
    n, p = arch.NUM_CLIPS, cfg.INPUT.NUM_PRE_CLIPS
    _need(p % n == 0, "INPUT.NUM_PRE_CLIPS", f"must be a multiple of {key('NUM_CLIPS')} ({n}); got {p}")
    stride, kernel = p // n, arch.FEATPOOL.KERNEL_SIZE
    _need((p - kernel) // stride + 1 == n, key("FEATPOOL.KERNEL_SIZE"),
          f"pooling {p} rows with kernel {kernel} and stride {stride} gives {(p - kernel) // stride + 1} clips, "
          f"not {key('NUM_CLIPS')} = {n}; use a kernel between {stride} and {2 * stride - 1}")
    counts = list(arch.FEAT2D.POOLING_COUNTS)
    _need(len(counts) > 0 and all(_is_int(c) and c > 0 for c in counts), key("FEAT2D.POOLING_COUNTS"),
          f"expected a non-empty list of positive integers, got {counts}")
    largest = counts[0] + sum(c * 2 ** (g + 1) for g, c in enumerate(counts[1:]))
    _need(largest < n, key("FEAT2D.POOLING_COUNTS"),
          f"{counts} reaches offset {largest}, which must stay below {key('NUM_CLIPS')} = {n}")
    _need(arch.FEAT2D.NAME in FEAT2D_NAMES, key("FEAT2D.NAME"),
          f"expected {' or '.join(repr(x) for x in FEAT2D_NAMES)}, got {arch.FEAT2D.NAME!r}")
    _need((arch.PREDICTOR.KERNEL_SIZE - 1) * arch.PREDICTOR.NUM_STACK_LAYERS % 2 == 0,
          key("PREDICTOR.KERNEL_SIZE"),
          "(KERNEL_SIZE - 1) * NUM_STACK_LAYERS must be even so that the map returns to N x N")
    lstm, size = ((arch.INTEGRATOR.LSTM, "INTEGRATOR.QUERY_HIDDEN_SIZE") if cfg.MODEL.ARCHITECTURE == "TAN"
                  else (arch.TEXT_ENCODER.LSTM, "TEXT_ENCODER.LSTM.HIDDEN_SIZE"))
    if lstm.BIDIRECTIONAL:
        _need((arch.INTEGRATOR.QUERY_HIDDEN_SIZE if cfg.MODEL.ARCHITECTURE == "TAN" else lstm.HIDDEN_SIZE) % 2 == 0,
              key(size), "must be even when the LSTM is bidirectional (it is split between the two directions)")


def _valid_cells(n, pooling_counts):
    """The number of candidate moments of the N x N map (docs/model.md §3.1): the diagonal,
    then each offset's starts at the stride of its group."""
    cells, stride, offset = n, 1, 0
    for count in pooling_counts:
        for _ in range(count):
            offset += stride
            cells += len(range(0, n - offset, stride))
        stride *= 2
    return cells


def _check_mmn(cfg):
    """MMN's loss and score settings (docs/mmn.md)."""
    loss = cfg.MODEL.MMN.LOSS
    for name in ("TAU_VIDEO", "TAU_SENT"):
        _need(loss[name] > 0, f"MODEL.MMN.LOSS.{name}", f"expected a positive temperature, got {loss[name]}")
    for name in ("NEGATIVE_VIDEO_IOU", "SENT_REMOVAL_IOU"):
        _need(0.0 <= loss[name] <= 1.0, f"MODEL.MMN.LOSS.{name}", f"expected an IoU in [0, 1], got {loss[name]}")
    for name in ("CONTRASTIVE_WEIGHT", "BCE_WEIGHT", "MARGIN"):
        _need(loss[name] >= 0, f"MODEL.MMN.LOSS.{name}", f"expected a value >= 0, got {loss[name]}")
    _need(loss.PAIRWISE_SENT_WEIGHT == 0, "MODEL.MMN.LOSS.PAIRWISE_SENT_WEIGHT",
          f"MMN defines this key but its code never uses it, and neither does tan; expected 0, "
          f"got {loss.PAIRWISE_SENT_WEIGHT}")
    cells = _valid_cells(cfg.MODEL.MMN.NUM_CLIPS, cfg.MODEL.MMN.FEAT2D.POOLING_COUNTS)
    _need(loss.NUM_POSTIVE_VIDEO_PROPOSAL <= cells, "MODEL.MMN.LOSS.NUM_POSTIVE_VIDEO_PROPOSAL",
          f"{loss.NUM_POSTIVE_VIDEO_PROPOSAL} positive cells asked for, but the map has {cells} valid cells")
    encoder = cfg.MODEL.MMN.TEXT_ENCODER
    _need(encoder.NAME in TEXT_ENCODERS, "MODEL.MMN.TEXT_ENCODER.NAME",
          f"expected {' or '.join(repr(x) for x in TEXT_ENCODERS)}, got {encoder.NAME!r}")
    _need(encoder.BERT.LR_SCALE >= 0, "MODEL.MMN.TEXT_ENCODER.BERT.LR_SCALE",
          f"expected a value >= 0, got {encoder.BERT.LR_SCALE}")
    _need(cfg.TEST.CONTRASTIVE_SCORE_POW >= 0, "TEST.CONTRASTIVE_SCORE_POW",
          f"expected a value >= 0, got {cfg.TEST.CONTRASTIVE_SCORE_POW}")
    _need(not (cfg.INPUT.SENTENCE_FEATURES and encoder.NAME == "BERT"), "INPUT.SENTENCE_FEATURES",
          "precomputed sentence features replace the word input, but MODEL.MMN.TEXT_ENCODER.NAME 'BERT' reads "
          "the sentence's text; set MODEL.MMN.TEXT_ENCODER.NAME LSTM")


def _check_values(cfg):
    """Ranges, orders and choices."""
    loss = model_settings(cfg).LOSS
    _need(0.0 <= loss.MIN_IOU < loss.MAX_IOU <= 1.0, model_key(cfg, "LOSS.MIN_IOU"),
          f"need 0 <= MIN_IOU < MAX_IOU <= 1; got MIN_IOU {loss.MIN_IOU}, MAX_IOU {loss.MAX_IOU}")
    if cfg.MODEL.ARCHITECTURE == "MMN":
        _check_mmn(cfg)
    _need(0.0 <= cfg.TEST.NMS_THRESH <= 1.0, "TEST.NMS_THRESH", f"expected a value in [0, 1], got {cfg.TEST.NMS_THRESH}")
    _need(cfg.TEST.NMS_UNITS in NMS_UNITS, "TEST.NMS_UNITS",
          f"expected {' or '.join(repr(u) for u in NMS_UNITS)}, got {cfg.TEST.NMS_UNITS!r}")
    _need(cfg.SOLVER.LR > 0, "SOLVER.LR", f"expected a positive learning rate, got {cfg.SOLVER.LR}")
    milestones = list(cfg.SOLVER.MILESTONES)
    _need(all(_is_int(m) and m > 0 for m in milestones) and milestones == sorted(milestones), "SOLVER.MILESTONES",
          f"expected increasing positive epoch numbers, got {milestones}")
    for key in ("TRAIN", "VAL", "TEST"):
        names = cfg.DATASETS[key]
        _need(all(isinstance(x, str) and x for x in names), f"DATASETS.{key}",
              f"expected a list of dataset names, got {names!r}")
    _need(cfg.TEST.BEST_METRIC in metric_names(), "TEST.BEST_METRIC",
          f"expected one of {', '.join(metric_names())}; got {cfg.TEST.BEST_METRIC!r}")
    _need(cfg.SOLVER.AMP in AMP_MODES, "SOLVER.AMP",
          f"expected {', '.join(repr(m) for m in AMP_MODES[:-1])} or {AMP_MODES[-1]!r}, got {cfg.SOLVER.AMP!r}")
    _need(0.0 <= cfg.INPUT.FEATURE_LENGTH_TOLERANCE < 1.0, "INPUT.FEATURE_LENGTH_TOLERANCE",
          f"expected a fraction in [0, 1), got {cfg.INPUT.FEATURE_LENGTH_TOLERANCE}")
    device = cfg.MODEL.DEVICE
    _need(device in ("auto", "cpu", "cuda") or (device.startswith("cuda:") and device[5:].isdigit()),
          "MODEL.DEVICE", f"expected 'auto', 'cpu', 'cuda' or 'cuda:N', got {device!r}")


def _differences(node, default, prefix):
    for name, value in node.items():
        if isinstance(value, CfgNode):
            yield from _differences(value, default[name], f"{prefix}.{name}")
        elif value != default[name]:
            yield f"{prefix}.{name}"


def _check_inactive_settings(cfg):
    """Settings of an architecture the run does not use would be ignored without a word: refuse them."""
    active = model_settings(cfg)
    for arch in ARCHITECTURES:
        if arch == cfg.MODEL.ARCHITECTURE:
            continue
        changed = list(_differences(cfg.MODEL[arch], _C.MODEL[arch], f"MODEL.{arch}"))
        if changed:
            key = changed[0]
            own = model_key(cfg, key.split(".", 2)[2])
            hint = f"; set {own} instead" if _has_key(active, key.split(".", 2)[2]) else ""
            raise TanError(f"config key {key} is set, but MODEL.ARCHITECTURE is {cfg.MODEL.ARCHITECTURE!r}, which "
                           f"reads MODEL.{cfg.MODEL.ARCHITECTURE} only{hint}")


def _has_key(node, dotted):
    for part in dotted.split("."):
        if not isinstance(node, CfgNode) or part not in node:
            return False
        node = node[part]
    return True


def validate_config(cfg):
    """Reject values that are of the right type but cannot work together."""
    _check_inactive_settings(cfg)
    _check_counts(cfg)
    _check_map_geometry(cfg)
    _check_values(cfg)


def load_config(config_file=None, opts=(), freeze=True):
    """Defaults, then ``config_file`` (if given), then ``opts`` pairs; validated."""
    cfg = get_cfg_defaults()
    if config_file:
        _merge_file(cfg, config_file)
    _merge_overrides(cfg, opts)
    validate_config(cfg)
    if freeze:
        cfg.freeze()
    return cfg


def load_config_text(text, source, opts=(), freeze=True):
    """Defaults, then the YAML ``text`` (a config stored in a checkpoint; ``source``
    names it in errors), then ``opts`` pairs; validated."""
    cfg = get_cfg_defaults()
    _merge_yaml(cfg, text, source)
    _merge_overrides(cfg, opts)
    validate_config(cfg)
    if freeze:
        cfg.freeze()
    return cfg


def save_config(cfg, path):
    """Write the merged config as YAML that :func:`load_config` reads back."""
    atomic_write_text(path, cfg.dump())
