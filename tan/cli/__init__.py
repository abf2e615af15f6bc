"""Command-line entry points: ``tan-train``, ``tan-test``, ``tan-predict``,
``tan-visualize`` (also reachable as ``python tools/*.py``)."""
