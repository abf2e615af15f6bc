#!/usr/bin/env python
"""Same as the `tan-convert-config` command (tan/cli/convert_config.py); runs from a checkout without installing."""
import checkout_path  # noqa: F401  (this checkout's tan first on sys.path)
from tan.cli.convert_config import cli

if __name__ == "__main__":
    cli()
