"""A test-only plug-in: the process kills itself (SIGKILL) at one point of a checkpoint's save, as a
power cut or the OOM killer would stop it there.

``TAN_TEST_KILL_AT`` names the checkpoint file and the point, ``model_2e.pth:renamed``:

- ``start``: its temporary file has just been created, empty;
- ``written``: the temporary file is whole, not yet renamed into place;
- ``renamed``: the checkpoint is in place, last_checkpoint not yet written;
- ``marker_written``: last_checkpoint's temporary file is whole, not yet renamed;
- ``marker_renamed``: last_checkpoint names the checkpoint (the save is done).

Without the variable it changes nothing. Loaded with ``PLUGINS: ["tests/plugins/kill_at_save.py"]``.
"""
import os
import signal
import tempfile

POINTS = ("start", "written", "renamed", "marker_written", "marker_renamed")
MARKER = "last_checkpoint"


def _kill():
    os.kill(os.getpid(), signal.SIGKILL)


def _install(target, point):
    replace, mkstemp = os.replace, tempfile.mkstemp
    saved = []  # the target was renamed into place: the next write of the marker is its save's

    def killing_mkstemp(*args, **kwargs):
        made = mkstemp(*args, **kwargs)
        if point == "start" and str(kwargs.get("prefix", "")).startswith(f".{target}."):
            _kill()
        return made

    def killing_replace(src, dst, **kwargs):
        name = os.path.basename(os.fspath(dst))
        ours = name == target or (name == MARKER and saved)
        before, after = ("written", "renamed") if name == target else ("marker_written", "marker_renamed")
        if ours and point == before:
            _kill()
        replace(src, dst, **kwargs)
        if name == target:
            saved.append(name)
        if ours and point == after:
            _kill()

    os.replace, tempfile.mkstemp = killing_replace, killing_mkstemp


_spec = os.environ.get("TAN_TEST_KILL_AT", "")
if _spec:
    _target, _, _point = _spec.partition(":")
    if _point not in POINTS:
        raise ValueError(f"TAN_TEST_KILL_AT {_spec!r}: expected FILE:POINT, POINT one of {', '.join(POINTS)}")
    _install(_target, _point)
