"""MMN, the mutual matching network (AAAI 2022), MODEL.ARCHITECTURE "MMN" (docs/mmn.md)."""
from .model import MMN

__all__ = ["MMN"]
