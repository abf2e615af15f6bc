#!/usr/bin/env python
"""Same as the `tan-test` command (tan/cli/test.py); runs from a checkout without installing."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tan.cli.test import cli  # noqa: E402

if __name__ == "__main__":
    cli()
