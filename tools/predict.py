#!/usr/bin/env python
"""Same as the `tan-predict` command (tan/cli/predict.py); runs from a checkout without installing."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tan.cli.predict import cli  # noqa: E402

if __name__ == "__main__":
    cli()
