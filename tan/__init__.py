"""tan: config-driven training and evaluation of 2D-map models for temporal video grounding
(2D-TAN and MMN built in; more as plug-ins, docs/models.md).

The Python API (tan/api.py; docs/prediction.md, "Python API")::

    import tan
    model = tan.load_model("outputs/synthetic/model_final.pth")
    video = model.encode_video(features, duration)
    moments = model.ground(video, ["the cook holds the pan."], topk=5)
"""

from .version import __version__

# The API is imported on first use, so that `import tan` (and every command's
# start) does not pay for torch until it is needed.
_API = ("load_model", "Grounder", "EncodedVideo", "Moment", "Answer")
__all__ = ["__version__", *_API]


def __getattr__(name):
    if name in _API:
        from . import api
        return getattr(api, name)
    raise AttributeError(f"module 'tan' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_API))
