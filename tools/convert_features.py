#!/usr/bin/env python
"""Same as the `tan-convert-features` command (tan_apps/commands/convert_features.py); runs from a checkout without installing."""
import checkout_path  # noqa: F401  (this checkout's tan first on sys.path)
from tan_apps.commands.convert_features import cli

if __name__ == "__main__":
    cli()
