"""Imported first by every tool here: puts this checkout's ``tan`` package
ahead of any installed copy, so ``python tools/X.py`` runs without installing
and always runs the code next to it."""
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)
