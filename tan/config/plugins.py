"""Plug-ins: Python modules that add models, annotation formats, evaluators, text inputs or video backbones.

A plug-in registers what it adds when it is imported (docs/models.md §1). A
config names the plug-ins it needs in ``PLUGINS``, as importable module
names (``my_lab.grounding``) or as paths of a ``.py`` file or of a package
folder (taken from the current directory). They are imported before the
rest of the config is read, so that the keys a plug-in adds can be set in
the same file; a config stored in a checkpoint names them too, so a
checkpoint of a plug-in model loads wherever its plug-in can be imported.

The config names its plug-ins rather than the environment providing them
(Python entry points) so that a config, a run folder and a checkpoint say
by themselves which code they need, and installing a package never changes
what an existing config means.

The built-in models are the plug-in ``tan.modeling``, the built-in evaluators the plug-in
``tan.evaluation`` and the grounding of long videos by windows ``tan.engine.long_videos`` (which
declares the checks of TEST.WINDOW), loaded first.
"""
import importlib
import importlib.util
import os
import sys
import traceback

from ..errors import TanError

BUILTIN_PLUGINS = ("tan.modeling", "tan.evaluation", "tan.engine.long_videos")
# module name -> the absolute path (a .py file or a package folder) of each plug-in imported by path:
# what names it again in another process (extractor records name the plug-in of their backbone)
_FROM_PATH = {}


def _is_path(name):
    return name.endswith(".py") or os.sep in name or "/" in name or os.path.isdir(name)


def _module_name_of(path):
    """The name a plug-in given by path is imported under: its file or folder name."""
    return os.path.splitext(os.path.basename(os.path.normpath(path)))[0]


def _import_path(path, source):
    given, path = path, os.path.abspath(path)
    if os.path.isdir(path):
        init = os.path.join(path, "__init__.py")
        if not os.path.isfile(init):
            raise TanError(f"{source}: plug-in folder {path!r} has no __init__.py; expected a Python package")
        location, search = init, [path]
    elif os.path.isfile(path):
        location, search = path, None
    else:
        # a tool's own option (tan-extract-features --plugins) is given again as itself, not as a config key
        again = ("PLUGINS on the command line, e.g. PLUGINS \"['/path/to/plugin']\"" if "PLUGINS" in source
                 else f"its absolute path: {source} /path/to/plugin")
        raise TanError(f"{source}: plug-in {given!r} not found (PLUGINS takes module names, or paths of a .py file "
                       f"or a package folder, relative to the current directory {os.getcwd()!r}); run from the "
                       f"folder the path is relative to, or give {again}")
    name = _module_name_of(path)
    loaded = sys.modules.get(name)
    if loaded is not None:
        if os.path.abspath(getattr(loaded, "__file__", "") or "") == location:
            return loaded
        raise TanError(f"{source}: plug-in {path!r} would be imported as {name!r}, which names another module "
                       f"({getattr(loaded, '__file__', None) or 'built in'}); rename the file or folder")
    spec = importlib.util.spec_from_file_location(name, location, submodule_search_locations=search)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before running it, so that its own relative imports find it
    _FROM_PATH[name] = path
    try:
        spec.loader.exec_module(module)
    except BaseException as e:
        del sys.modules[name]
        del _FROM_PATH[name]
        if isinstance(e, (Exception, SystemExit)):  # a plug-in that exits while imported fails too
            raise _plugin_failure(e, given, source) from None
        raise
    return module


def _plugin_failure(error, name, source):
    """The TanError for plug-in ``name`` whose code raised ``error`` while it was imported: one line
    naming the file, the line and the error; the plug-in's own traceback (without the frames of the
    import machinery and of this module) as its details, for the plug-in's author."""
    if isinstance(error, TanError):  # the plug-in's own clear error (a name registered twice, say)
        return TanError(f"{source}: plug-in {name!r}: {error}", details=error.details)
    if isinstance(error, SyntaxError):  # IndentationError too: the file itself cannot be compiled
        return TanError(f"{source}: plug-in {name!r} cannot be imported: {error.filename}, line {error.lineno}: "
                        f"{type(error).__name__}: {error.msg}",
                        details="".join(traceback.format_exception_only(type(error), error)))
    stack = [frame for frame in traceback.extract_tb(error.__traceback__)
             if not frame.filename.startswith("<frozen importlib") and frame.filename != __file__]
    where = f"{stack[-1].filename}, line {stack[-1].lineno}: " if stack else ""
    details = "".join(["Traceback of the plug-in's code (most recent call last):\n", *traceback.format_list(stack),
                       *traceback.format_exception_only(type(error), error)])
    what = (f"it called sys.exit({error.code!r})" if isinstance(error, SystemExit)
            else f"{type(error).__name__}: {error}")
    return TanError(f"{source}: plug-in {name!r} failed while it was imported: {where}{what}", details=details)


def import_plugin(name, source="PLUGINS"):
    """Import plug-in ``name`` (a module name or a path) once; ``source`` names the setting in errors."""
    if not isinstance(name, str) or not name:
        raise TanError(f"{source}: expected module names or paths, got {name!r}")
    if _is_path(name):
        return _import_path(name, source)
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name and (name == e.name or name.startswith(e.name + ".")):
            raise TanError(f"{source}: plug-in module {name!r} cannot be imported ({e}); install it, put its "
                           f"folder on PYTHONPATH, or give the path of its .py file or package folder") from None
        raise _plugin_failure(e, name, source) from None  # a module that the plug-in's own code imports
    except (Exception, SystemExit) as e:  # noqa: BLE001 - whatever its code raises, the user is told where
        raise _plugin_failure(e, name, source) from None


def plugin_of(module):
    """How PLUGINS names again the plug-in whose code is the module named ``module`` (a class's
    ``__module__``): the absolute path its top package or file was imported from, for a plug-in given
    by path; else the module's name. None for tan's own modules and for a script's (``__main__``),
    which no other process can import."""
    top = module.partition(".")[0]
    if top in ("tan", "__main__"):
        return None
    return _FROM_PATH.get(top, module)


def load_plugins(names=(), source="PLUGINS"):
    """The built-in plug-ins, then ``names``; each is imported once per process."""
    for name in BUILTIN_PLUGINS:
        importlib.import_module(name)
    for name in names:
        import_plugin(name, source)
