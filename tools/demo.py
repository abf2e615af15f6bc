#!/usr/bin/env python
"""Same as the `tan-demo` command (tan/cli/demo.py); runs from a checkout without installing."""
import checkout_path  # noqa: F401  (this checkout's tan first on sys.path)
from tan.cli.demo import cli

if __name__ == "__main__":
    cli()
