"""Command-line parsing shared by the tools: options, then config overrides."""
import argparse
import os
import sys

DEFAULT_CONFIG = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "configs",
                                               "2dtan_128x128_pool_k5l8_tacos.yaml"))


class ConfigArgumentParser(argparse.ArgumentParser):
    """Options may also follow the trailing KEY VALUE pairs (``... SOLVER.LR 0.1 --skip-test``).

    Config keys and values never start with "--", so such tokens (and the value
    of an option that takes one) are moved in front before parsing.
    """

    def parse_args(self, args=None, namespace=None):
        args = list(sys.argv[1:] if args is None else args)
        takes_value = {s: a.nargs != 0 for a in self._actions for s in a.option_strings}
        front, rest, k = [], [], 0
        while k < len(args):
            token = args[k]
            name = token.split("=", 1)[0]
            if name in takes_value:
                front.append(token)
                if takes_value[name] and "=" not in token and k + 1 < len(args):
                    front.append(args[k + 1])
                    k += 1
            else:
                rest.append(token)
            k += 1
        return super().parse_args(front + rest, namespace)


def add_overrides(parser, example="SOLVER.MAX_EPOCH 5 OUTPUT_DIR outputs/run1"):
    """The trailing KEY VALUE config overrides."""
    parser.add_argument("opts", nargs=argparse.REMAINDER, metavar="KEY VALUE",
                        help=f"config overrides, e.g. {example}")


def default_argument_parser(description, epilog=""):
    """--config-file, the legacy --local_rank, and KEY VALUE overrides: what train and test take."""
    parser = ConfigArgumentParser(description=description, epilog=epilog,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config-file", default=DEFAULT_CONFIG, metavar="FILE",
                        help="YAML config file (default: the TACoS reference config)")
    # Legacy launchers pass --local_rank / --local-rank; torchrun sets LOCAL_RANK.
    parser.add_argument("--local_rank", "--local-rank", type=int, default=None, help=argparse.SUPPRESS)
    add_overrides(parser)
    return parser
