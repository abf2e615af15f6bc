"""The one-line error of a weights file that cannot be used."""
import os

from ...errors import TanError


class WeightsFileError(TanError):
    pass


def weights_error(path, what, problem, source=""):
    """``path`` (the ``what``) cannot be used because of ``problem``; ``source`` says where to get it."""
    where = f"; {source}" if source else ""
    return WeightsFileError(f"{what} {path!r}: {problem}{where}")


def require_file(path, what, source=""):
    if not os.path.exists(path):
        raise weights_error(path, what, "no such file", source)
    if os.path.isdir(path):
        raise weights_error(path, what, "a folder, not a file", source)
    if os.path.getsize(path) == 0:
        raise weights_error(path, what, "an empty file (0 bytes)", source)
