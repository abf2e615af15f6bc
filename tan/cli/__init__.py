"""Command-line entry points: ``tan-train``, ``tan-test``, ``tan-predict``,
``tan-visualize``, ``tan-check-data``, ``tan-convert-features`` (also
reachable as ``python tools/*.py``)."""
from .interrupts import install_at_start

# Before the tools' modules import torch (seconds): a Ctrl-C from here on ends
# a tool with one line and exit status 130, not an import traceback.
install_at_start()
