#!/usr/bin/env python
"""Same as the `tan-synthetic-videos` command (tan_apps/commands/synthetic_videos.py); runs from a checkout without installing."""
import checkout_path  # noqa: F401  (this checkout's tan first on sys.path)
from tan_apps.commands.synthetic_videos import cli

if __name__ == "__main__":
    cli()
