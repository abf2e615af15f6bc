"""The shape of the package, checked: layers, private names, function size.

These are the rules of the Code map (docs/code-map.md); a change that breaks one fails
here with the file and line to look at."""
import ast
import os
import re

from conftest import REPO

TAN = os.path.join(REPO, "tan")  # the library
APPS = os.path.join(REPO, "tan_apps")  # the applications built on it


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
    return {n for n in names if n.split(".")[0] in ("tan", "tan_apps")}


def test_config_depends_on_nothing_above_utils():
    allowed = ("tan.config", "tan.utils", "tan.errors")
    wrong = [f"{path}: imports {name}" for path, tree in python_files(os.path.join(TAN, "config"))
             for name in imported_modules(path, tree) if not name.startswith(allowed)]
    assert not wrong, wrong


def test_the_packages_never_import_the_measuring_tools_or_the_tests():
    wrong = [f"{path}: imports {name}" for path, tree in python_files(TAN, APPS)
             for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
             for name in [getattr(node, "module", None) or ""] + [a.name for a in node.names]
             if name.split(".")[0] in ("benchmarking", "oracles")]
    assert not wrong, wrong


def test_the_library_never_imports_an_application():
    """tan/ is the library; tan_apps/ (the commands, the demo, the seed launcher, the converters,
    the stand-ins, the generated data) is built on it and is never needed to run it."""
    wrong = [f"{path}: imports {name}" for path, tree in python_files(TAN)
             for name in imported_modules(path, tree) if name.split(".")[0] == "tan_apps"]
    assert not wrong, wrong


# Modules of this repository that tests and tools import by absolute name.
OWN_MODULES = ("tan", "tan_apps", "oracles", "golden", "conftest", "runs", "benchmarking", "helpers", "checkout_path")


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
    for path, tree in python_files(TAN, APPS, os.path.join(REPO, "tests"), os.path.join(REPO, "tools")):
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


def test_no_function_in_the_packages_is_longer_than_60_lines():
    long = [f"{path}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for path, tree in python_files(TAN, APPS) for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60]
    assert not long, long


def test_the_dataset_catalog_keeps_no_class_level_state():
    from tan.data.catalog import DatasetCatalog
    mutable = [name for name, value in vars(DatasetCatalog).items() if isinstance(value, (dict, list, set))]
    assert not mutable, mutable


# The layers of the library, lowest first, then the applications: a module imports only
# modules of its own layer or of lower ones (docs/code-map.md). tan/__init__.py stands
# above the library.
LAYERS = [("tan.errors", "tan.version"), ("tan.utils",), ("tan.config",), ("tan.structures",), ("tan.data",),
          ("tan.evaluation",), ("tan.video",), ("tan.modeling",), ("tan.solver", "tan.engine"), ("tan.api",),
          ("tan_apps.synthetic", "tan_apps.converters", "tan_apps.standin", "tan_apps.nlq_standin",
           "tan_apps.mad_standin"), ("tan_apps.cli",),
          ("tan_apps.seeds", "tan_apps.demo"), ("tan_apps.commands",)]


def layer_of(module):
    for level, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return level
    if module == "tan":
        return LAYERS.index(("tan.api",)) + 0.5
    return len(LAYERS) if module == "tan_apps" else None


def module_name(path):
    name = path[:-3].replace(os.sep, ".")
    return name[:-len(".__init__")] if name.endswith(".__init__") else name


def package_imports():
    """{module: the tan modules it imports (at any depth of the file)}; ``from pkg import mod``
    counts as importing ``pkg.mod`` when that is a module."""
    modules = {module_name(path): (path, tree) for path, tree in python_files(TAN, APPS)}
    graph = {}
    for name, (path, tree) in modules.items():
        targets = set()
        for target in imported_modules(path if not path.endswith("__init__.py") else path, tree):
            targets.add(target)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = name.split(".") if path.endswith("__init__.py") else name.split(".")[:-1]
                    parts = parts[:len(parts) - node.level + 1]
                    base = ".".join(parts + ([node.module] if node.module else []))
                targets.update(f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def test_no_module_imports_from_a_layer_above_its_own():
    wrong = [f"{name} imports {target}" for name, targets in package_imports().items() for target in targets
             if layer_of(name) is not None and layer_of(target) is not None and layer_of(target) > layer_of(name)]
    unplaced = [name for name in package_imports() if layer_of(name) is None]
    assert not wrong and not unplaced, (wrong, unplaced)


def test_set_up_knows_no_trainer():
    """The run's order descends: the trainer asks its own refusals, then calls set-up
    (Trainer.set_up); set-up never imports the trainer, its hooks or its step."""
    graph = package_imports()
    above = {name for name in graph if name.startswith(("tan.engine.trainer", "tan.engine.hooks", "tan.engine.step"))}
    assert not graph["tan.engine.setup"] & above, graph["tan.engine.setup"] & above


def with_packages_run(graph):
    """Importing ``a.b.c`` also runs ``a/b/__init__.py``: an edge to each package above a target,
    except those above the importer itself (they are being imported already)."""
    edges = {}
    for name, targets in graph.items():
        run = set(targets)
        for target in targets:
            parts = target.split(".")
            run.update(".".join(parts[:k]) for k in range(2, len(parts)) if ".".join(parts[:k]) in graph)
        edges[name] = {t for t in run if t != name and not name.startswith(t + ".")}
    return edges


def test_the_package_has_no_import_cycle():
    graph = package_imports()
    edges = with_packages_run(graph)
    state, cycles = {}, []

    def visit(node, stack):
        state[node] = "open"
        for target in sorted(edges[node]):
            if state.get(target) == "open":
                cycles.append(" -> ".join(stack[stack.index(target):] + [target]))
            elif target not in state:
                visit(target, stack + [target])
        state[node] = "done"

    for name in sorted(edges):
        if name not in state:
            visit(name, [name])
    assert not cycles, cycles


# Words that name a model (the built-in ones and their parts): the core speaks of
# "the model" and asks it (tan/config/models.py); only tan/modeling and the models'
# own files may name one.
MODEL_WORDS = re.compile(r"\b(TAN|MMN|2D-TAN|BERT|DistilBERT|tan2d|MS_TAN|MS-2D-TAN|ms2dtan|TAN_MSRA|tan_msra)\b"
                         r"|modeling\.(mmn|tan2d|ms2dtan|tan_msra)")
CORE = (os.path.join(TAN, "config"), os.path.join(TAN, "data"), os.path.join(TAN, "engine"), os.path.join(TAN, "evaluation"),
        os.path.join(APPS, "cli"), os.path.join(APPS, "commands"))


def test_the_core_names_no_model():
    named = []
    for folder in CORE:
        for path, _ in python_files(folder):
            with open(os.path.join(REPO, path)) as f:
                named += [f"{path}:{n}: {line.strip()}" for n, line in enumerate(f, 1) if MODEL_WORDS.search(line)]
    assert not named, named


def test_every_key_a_model_adds_has_a_comment():
    """As tests/test_config.py checks tan/config/defaults.py: each built-in model's and the example
    project's settings, one comment (or a comment block) above each key."""
    files = [os.path.join(TAN, "modeling", "map2d", "config.py"), os.path.join(TAN, "modeling", "tan2d", "config.py"),
             os.path.join(TAN, "modeling", "mmn", "config.py"), os.path.join(REPO, "projects", "dot_map", "config.py"),
             os.path.join(TAN, "modeling", "tan_msra", "config.py"), os.path.join(TAN, "modeling", "ms2dtan", "config.py")]
    undocumented = []
    for path in files:
        with open(path) as f:
            lines = f.read().splitlines()
        for index, line in enumerate(lines):
            if re.match(r"\s+(node|cfg)\.[A-Z_.]+ = ", line) and "CN()" not in line and "add_map_config" not in line:
                if not lines[index - 1].strip().startswith("#"):
                    undocumented.append(f"{os.path.relpath(path, REPO)}:{index + 1}: {line.strip()}")
    assert not undocumented, undocumented


def test_no_module_outside_a_format_s_own_names_a_format():
    """The inference loop and the engine run every format alike: a format's figures and files come
    from the evaluators it declares (tan.evaluation), so no engine module compares a dataset's format
    or imports a format's module; only the format and its own evaluator know it."""
    named = []
    for path, tree in python_files(os.path.join(TAN, "engine")):
        with open(os.path.join(REPO, path)) as f:
            named += [f"{path}:{n}: {line.strip()}" for n, line in enumerate(f, 1)
                      if re.search(r"annotation_format\s*==|NLQ_FORMAT|MAD_FORMAT|data\.formats\.\w", line)]
    assert not named, named
