"""The shape of the package, checked: layers, private names, function size.

These are the rules of the README's Code map; a change that breaks one fails
here with the file and line to look at."""
import ast
import os

from conftest import REPO

TAN = os.path.join(REPO, "tan")


def python_files(*folders):
    for folder in folders:
        for root, _, files in os.walk(folder):
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(root, name)
                    with open(path) as f:
                        yield os.path.relpath(path, REPO), ast.parse(f.read())


def imported_modules(path, tree):
    """Absolute names of the tan modules that a file imports."""
    package = os.path.dirname(path).replace(os.sep, ".")
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            names.add(base)
    return {n for n in names if n == "tan" or n.startswith("tan.")}


def test_config_depends_on_nothing_above_utils():
    allowed = ("tan.config", "tan.utils", "tan.errors")
    wrong = [f"{path}: imports {name}" for path, tree in python_files(os.path.join(TAN, "config"))
             for name in imported_modules(path, tree) if not name.startswith(allowed)]
    assert not wrong, wrong


def test_the_package_never_imports_the_measuring_tools():
    wrong = [f"{path}: imports {name}" for path, tree in python_files(TAN)
             for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
             for name in [getattr(node, "module", None) or ""] + [a.name for a in node.names]
             if name.split(".")[0] == "benchmarking"]
    assert not wrong, wrong


# Modules of this repository that tests and tools import by absolute name.
OWN_MODULES = ("tan", "golden", "conftest", "runs", "benchmarking", "helpers", "checkout_path")


def is_private(name):
    return name.startswith("_") and not name.startswith("__")


def attribute_chain(node):
    """``a.b._c`` -> ("a", ["b", "_c"]); None when the chain does not start at a name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.insert(0, node.attr)
        node = node.value
    return (node.id, parts) if isinstance(node, ast.Name) else None


def test_no_module_reaches_private_names_outside_its_package():
    """``from .sibling import _x`` stays inside one package; any other import of
    a private name or module, or ``imported.(...)._x``, reaches into another
    module's internals."""
    wrong = []
    for path, tree in python_files(TAN, os.path.join(REPO, "tests"), os.path.join(REPO, "tools")):
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                sibling = node.level == 1 and "." not in (node.module or "")
                names = [a.name for a in node.names] + (node.module or "").split(".")
                wrong += [f"{path}:{node.lineno} imports {name}" for name in names if is_private(name) and not sibling]
                if node.level or (node.module or "").split(".")[0] in OWN_MODULES:
                    imported.update(a.asname or a.name for a in node.names)
            elif isinstance(node, ast.Import):
                imported.update((a.asname or a.name).split(".")[0] for a in node.names
                                if a.name.split(".")[0] in OWN_MODULES)
        for node in ast.walk(tree):
            chain = attribute_chain(node) if isinstance(node, ast.Attribute) else None
            if chain and chain[0] in imported and any(is_private(part) for part in chain[1]):
                wrong.append(f"{path}:{node.lineno} uses {chain[0]}.{'.'.join(chain[1])}")
    assert not wrong, sorted(set(wrong))


def test_no_function_in_the_package_is_longer_than_60_lines():
    long = [f"{path}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for path, tree in python_files(TAN) for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60]
    assert not long, long


def test_the_dataset_catalog_keeps_no_class_level_state():
    from tan.data.catalog import DatasetCatalog
    mutable = [name for name, value in vars(DatasetCatalog).items() if isinstance(value, (dict, list, set))]
    assert not mutable, mutable
