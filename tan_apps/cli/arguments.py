"""Command-line parsing shared by the tools: options, then config overrides."""
import argparse
import os
import re
import sys

# A config key: OUTPUT_DIR, SOLVER.LR, MODEL.DEVICE ... (never a file name, which has lower case).
_CONFIG_KEY = re.compile(r"[A-Z][A-Z0-9_]*(\.[A-Z][A-Z0-9_]*)*")
# A negative number is a value, not an option, as argparse itself reads it (--seeds -1 2).
_NEGATIVE_NUMBER = re.compile(r"-\d+|-\d*\.\d+")

DEFAULT_CONFIG = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "configs",
                                               "2dtan_128x128_pool_k5l8_tacos.yaml"))


class ConfigArgumentParser(argparse.ArgumentParser):
    """Options may also follow the trailing KEY VALUE pairs (``... SOLVER.LR 0.1 --skip-test``).

    Config keys and values never start with "--", so such tokens (and the
    value of an option that takes one; for an option of several values, the
    tokens up to the next option or config key, negative numbers included) are
    moved in front; what is left is the KEY VALUE list."""

    def parse_args(self, args=None, namespace=None):
        args = list(sys.argv[1:] if args is None else args)
        nargs = {s: a.nargs for a in self._actions for s in a.option_strings}
        front, rest, k = [], [], 0
        while k < len(args):
            token = args[k]
            name = token.split("=", 1)[0]
            if name in nargs:
                front.append(token)
                if "=" not in token and nargs[name] in ("+", "*"):
                    while k + 1 < len(args) and not _CONFIG_KEY.fullmatch(args[k + 1]) \
                            and (not args[k + 1].startswith("-") or _NEGATIVE_NUMBER.fullmatch(args[k + 1])):
                        front.append(args[k + 1])
                        k += 1
                elif nargs[name] != 0 and "=" not in token and k + 1 < len(args):
                    front.append(args[k + 1])
                    k += 1
            else:
                rest.append(token)
            k += 1
        if not any(a.dest == "opts" for a in self._actions):
            return super().parse_args(front + rest, namespace)
        # The KEY VALUE list is set aside so that an option of several values cannot swallow it.
        parsed = super().parse_args(front, namespace)
        parsed.opts = rest
        return parsed


def add_overrides(parser, example="SOLVER.MAX_EPOCH 5 OUTPUT_DIR outputs/run1"):
    """The trailing KEY VALUE config overrides."""
    parser.add_argument("opts", nargs=argparse.REMAINDER, metavar="KEY VALUE",
                        help=f"config overrides, e.g. {example}")


def default_argument_parser(description, epilog="", config_default=DEFAULT_CONFIG,
                            config_help="YAML config file (default: the TACoS reference config)"):
    """--config-file, the legacy --local_rank, and KEY VALUE overrides: what train and test take."""
    parser = ConfigArgumentParser(description=description, epilog=epilog,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config-file", default=config_default, metavar="FILE", help=config_help)
    # Legacy launchers pass --local_rank / --local-rank; torchrun sets LOCAL_RANK.
    parser.add_argument("--local_rank", "--local-rank", type=int, default=None, help=argparse.SUPPRESS)
    add_overrides(parser)
    return parser
