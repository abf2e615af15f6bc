"""The config checks that features declare where they live.

The core's settings are checked in tan/config/setup.py and a model's by its own ``validate_config``;
a feature outside the core loop (training on long videos' windows, the window stage, grounding long
videos by windows, the evaluators) declares the checks of its keys in its own module, registered
here by name with :func:`register_config_check`, so that the config knows them without importing
the features (they register when the built-in plug-ins are imported, tan/config/plugins.py).
``validate_config`` runs every registered check, in registration order, after the core's.
"""
import math

# name -> check(cfg), in registration order
CONFIG_CHECKS = {}


def register_config_check(name):
    """Decorator: register ``check(cfg)`` (raising TanError through ``need`` on a bad value) under
    ``name``, the feature whose keys it checks."""
    def deco(check):
        if name in CONFIG_CHECKS and CONFIG_CHECKS[name] is not check:
            raise KeyError(f"config check {name!r} is registered already")
        CONFIG_CHECKS[name] = check
        return check
    return deco


def run_config_checks(cfg):
    for check in list(CONFIG_CHECKS.values()):
        check(cfg)


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(value):
    """A finite int or float, not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
