"""The one way the tools read YAML (configs, the configs stored in checkpoints,
dataset catalogs): UTF-8 text only, and a key given twice in one mapping is
an error.

PyYAML's own loader lets the last of two equal keys win without a word: a
second ``SOLVER:`` block appended to a config silently replaces the whole
first one, so its learning rate changes and the keys it did not repeat fall
back to their defaults. Here the second occurrence is refused with the line
numbers of both.
"""
import yaml

from ..errors import TanError
from .io import read_named_text


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a mapping holding the same key twice."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            first_line = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":  # "<<: *base": its keys may be overridden here
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    line = first_line.get(key)
                except TypeError:  # an unhashable key: SafeLoader's own error says so
                    break
                if line is not None:
                    raise _DuplicateKey(key, line, key_node.start_mark.line + 1)
                first_line[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


class _DuplicateKey(Exception):
    def __init__(self, key, first, second):
        super().__init__(key, first, second)
        self.key, self.first, self.second = key, first, second


def parse_yaml(text, source):
    """The data of YAML ``text``; ``source`` names it in errors ("config file 'a.yaml'")."""
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except _DuplicateKey as e:
        raise TanError(f"{source}, line {e.second}: key {e.key!r} is given a second time (first at line "
                       f"{e.first}); plain YAML would keep the last one and drop the first without a word; merge "
                       f"them into one") from None
    except yaml.YAMLError as e:
        raise TanError(f"{source} is not valid YAML: {_one_line(e)}") from None


def _one_line(error):
    """PyYAML's error on one line: where, then what (its own text spans several, with a caret drawing)."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None)
    if mark is None or not problem:
        return " ".join(str(error).split())
    context = getattr(error, "context", None)
    return f"line {mark.line + 1}, column {mark.column + 1}: {(context + ', ') if context else ''}{problem}"


def read_yaml_file(path, source):
    """:func:`parse_yaml` of the UTF-8 file ``path``."""
    return parse_yaml(read_named_text(path, source), source)
