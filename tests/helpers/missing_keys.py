"""Each key of a reference's experiment file removed in turn, and what tan-convert-config says of it."""
import copy

from tan.errors import TanError

# What a message about a missing key must not show in its place (an empty default is named as such).
STAND_INS = ("None", "''", "{")


def leaf_paths(node, prefix=()):
    """The key paths of a nested mapping's values (an empty mapping is a value)."""
    for key, value in node.items():
        if isinstance(value, dict) and value:
            yield from leaf_paths(value, prefix + (key,))
        else:
            yield prefix + (key,)


def unclear_messages(data, convert, keep=()):
    """[(dotted key, message)] for each key of ``data`` (but ``keep``) whose removal makes ``convert(data)``
    raise a TanError that does not name the key by its whole path and say it is missing, or that shows a
    stand-in for it. A key whose removal converts has a default in the reference's code."""
    unclear = []
    for path in leaf_paths(data):
        if path in keep:
            continue
        changed = copy.deepcopy(data)
        node = changed
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]
        dotted = ".".join(path)
        try:
            convert(changed)
        except TanError as e:
            message = str(e).split(": ", 1)[1]  # after the file's path
            shown = message.replace("default: ''", "")
            if not (dotted in message and "missing" in message) or any(s in shown for s in STAND_INS):
                unclear.append((dotted, message))
    return unclear
