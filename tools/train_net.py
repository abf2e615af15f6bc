#!/usr/bin/env python
"""Same as the `tan-train` command (tan_apps/commands/train.py); runs from a checkout without installing."""
import checkout_path  # noqa: F401  (this checkout's tan first on sys.path)
from tan_apps.commands.train import cli

if __name__ == "__main__":
    cli()
