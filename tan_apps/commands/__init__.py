"""The commands, one module each: tan-train, tan-test, tan-predict, tan-visualize,
tan-check-data, tan-convert-features, tan-convert-config, tan-extract-features,
tan-synthetic-videos, tan-demo (also reachable as ``python tools/*.py``)."""
# First, before the commands' modules import torch (seconds): from here on a Ctrl-C ends
# a command with one line and exit status 130, not an import traceback.
import tan_apps.cli  # noqa: F401

# The built-in synthetic dataset is written on first use by the generator this registers.
import tan_apps.synthetic  # noqa: E402,F401
