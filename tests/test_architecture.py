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


def test_no_module_reaches_private_names_outside_its_package():
    """``from .sibling import _x`` stays inside one package; any other import of
    a private name, or ``imported._x``, reaches into another module's internals."""
    wrong = []
    for path, tree in python_files(TAN, os.path.join(REPO, "tests"), os.path.join(REPO, "tools")):
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                sibling = node.level == 1 and "." not in (node.module or "")
                wrong += [f"{path}:{node.lineno} imports {a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__") and not sibling]
                if node.level or (node.module or "").split(".")[0] == "tan":
                    imported.update(a.asname or a.name for a in node.names)
            elif isinstance(node, ast.Import):
                imported.update((a.asname or a.name).split(".")[0] for a in node.names if a.name.startswith("tan"))
        wrong += [f"{path}:{node.lineno} uses {node.value.id}.{node.attr}" for node in ast.walk(tree)
                  if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                  and node.value.id in imported and node.attr.startswith("_") and not node.attr.startswith("__")]
    assert not wrong, wrong


def test_no_function_in_the_package_is_longer_than_60_lines():
    long = [f"{path}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for path, tree in python_files(TAN) for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60]
    assert not long, long


def test_the_dataset_catalog_keeps_no_class_level_state():
    from tan.data.catalog import DatasetCatalog
    mutable = [name for name, value in vars(DatasetCatalog).items() if isinstance(value, (dict, list, set))]
    assert not mutable, mutable
