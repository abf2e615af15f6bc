#!/usr/bin/env python
"""Same as the `tan-predict` command (tan_apps/commands/predict.py); runs from a checkout without installing."""
import checkout_path  # noqa: F401  (this checkout's tan first on sys.path)
from tan_apps.commands.predict import cli

if __name__ == "__main__":
    cli()
