"""Optional packages, imported only where a config asks for them, with an
error that says how to get them."""
from ..errors import TanError


def require_transformers(asked_by="", alternative=""):
    """The transformers package (the "bert" extra). ``asked_by``: the setting that needs
    it, and ``alternative``: what to set instead, both for the error."""
    try:
        import transformers
    except ImportError:
        who = f"{asked_by} needs" if asked_by else "this needs"
        other = f", or {alternative}" if alternative else ""
        raise TanError(f"{who} the transformers package: pip install 'tan[bert]'{other}") from None
    return transformers
