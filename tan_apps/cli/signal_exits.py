"""Ctrl-C in a tool: one line naming what was interrupted and what is kept,
exit status 130, and no traceback, whenever it comes. SIGTERM (``kill``, a
job scheduler, a container's stop) while a tool runs is handled the same way
(:class:`Terminated`, exit status 143), so that its temporaries are removed
as they are for a Ctrl-C instead of being left behind by the default action.

A tool goes through three phases, and SIGINT does what suits each:

  starting  importing torch and the package, before :func:`run_cli` runs:
            nothing is written yet, so the tool prints its line and ends at once.
  running   inside ``main()``: KeyboardInterrupt is raised as usual, so
            ``finally`` blocks and atomic writes clean up; run_cli catches it.
            Training replaces this handler with its own while it trains
            (tan/engine/preemption.py) and stops with a checkpoint instead.
  ending    main() is over and run_cli reports and shuts down: the tool ends.

Processes forked by a tool (DataLoader workers) inherit the handler and ignore
SIGINT: a real Ctrl-C signals the whole foreground process group, and the
tool, not each worker, decides how to stop (the workers' own KeyboardInterrupt
would print tracebacks). A forked process gets SIGTERM's default action back
and ends on it at once (that is how a DataLoader stops a worker that does
not answer). Only tools install the handlers; a program that imports ``tan``
as a library keeps Python's usual KeyboardInterrupt and SIGTERM. A signal
that the tool was started with ignored (a script's ``&`` ignores SIGINT)
stays ignored here; training takes both signals over while it trains
(tan/engine/preemption.py), to stop with a checkpoint.

This module is imported by tan_apps/cli/__init__.py before anything heavy, so it
uses the standard library only.
"""
import os
import re
import signal
import sys
import threading
from contextlib import contextmanager

EXIT_INTERRUPTED = 128 + signal.SIGINT  # the shell's convention for "ended by SIGINT"
EXIT_TERMINATED = 128 + signal.SIGTERM
REDELIVERY_DELAY = 0.05  # seconds
# Every entry point of pyproject.toml's [project.scripts] (tests/test_interrupts.py checks).
TOOL_NAMES = ("tan-train", "tan-test", "tan-predict", "tan-visualize", "tan-check-data", "tan-convert-features",
              "tan-convert-config", "tan-extract-features", "tan-synthetic-videos", "tan-demo")
TOOLS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tools")
DEFAULT_ACTIVITY = ("running", "files already written are complete")
# Code that an exception must not cut in two; an interrupt waits until it is
# done. Starting a process: os.fork runs the logging module's fork callbacks,
# which swallow a KeyboardInterrupt and can leave its lock taken or released
# twice. Building a DataLoader iterator: one cut short cannot shut its workers
# down. Receiving a tensor from a worker: the worker's resource-sharer thread
# prints a ConnectionResetError traceback if the handshake is cut.
UNINTERRUPTIBLE = (("multiprocessing.process", "start"), ("torch.utils.data.dataloader", "__init__"),
                   ("multiprocessing.resource_sharer", "detach"))


class Terminated(KeyboardInterrupt):
    """SIGTERM while a tool runs: raised like the KeyboardInterrupt of a Ctrl-C, so that
    every clean-up that runs for one (``finally`` blocks, atomic writes) runs for it too."""


class _State:
    phase = "starting"
    owner = None  # the pid that installed the handler; forked children ignore SIGINT
    activity = DEFAULT_ACTIVITY
    reported = False  # the interruption's line has been printed
    sigterm_owner = None  # the pid that took SIGTERM over; forked children end on it
    fork_hooks = False  # os.register_at_fork has our hooks


def started_as_a_tool():
    """Whether this process runs one of the tools: a console script (tan-train ...),
    tools/*.py of this checkout, or ``python -m tan_apps.commands.X`` (while Python finds the
    module, sys.argv[0] is "-m")."""
    argv0 = (getattr(sys, "argv", None) or [""])[0]
    if argv0 == "-m":
        return True
    if re.sub(r"(-script\.pyw|\.exe)?$", "", os.path.basename(argv0)) in TOOL_NAMES:
        return True
    return bool(argv0) and os.path.dirname(os.path.abspath(argv0)) == TOOLS_DIR


def now_doing(activity, kept):
    """What the tool does from now on, and what a Ctrl-C leaves: the line reads
    "interrupted (Ctrl-C) while {activity}; {kept}"."""
    _State.activity = (activity, kept)


def message(error=None):
    """The line for a KeyboardInterrupt (``error`` a :class:`Terminated`: for SIGTERM)."""
    activity, kept = _State.activity
    how = "terminated (SIGTERM)" if isinstance(error, Terminated) else "interrupted (Ctrl-C)"
    return f"{how} while {activity}; {kept}"


def exit_code(error=None):
    return EXIT_TERMINATED if isinstance(error, Terminated) else EXIT_INTERRUPTED


def install_at_start():
    """Called on importing tan_apps.cli: a tool's Ctrl-C while it is still importing
    torch ends it with one line, instead of a traceback from deep in an import."""
    if started_as_a_tool():
        _install()


def _install():
    """Our handler in place of Python's default one; the handler it replaced
    (None when it left SIGINT alone: another handler set by the embedding
    program, or not the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    current = signal.getsignal(signal.SIGINT)
    if current is not signal.default_int_handler and current is not _on_sigint:
        return None
    signal.signal(signal.SIGINT, _on_sigint)
    _State.owner = os.getpid()
    return current


def _on_sigint(signum, frame):
    if os.getpid() != _State.owner:
        return  # a forked worker: its parent stops it
    if _State.phase == "running":
        if _in_uninterruptible_code(frame):
            _redeliver_soon(signal.SIGINT)
            return
        raise KeyboardInterrupt
    if not _State.reported:
        line = ("interrupted (Ctrl-C) while starting; nothing was written" if _State.phase == "starting"
                else "interrupted (Ctrl-C) while finishing; files already written are complete")
        _write_line(line)
    _exit_now()


def _on_sigterm(signum, frame):
    if os.getpid() != _State.sigterm_owner:  # a process forked outside os.fork's hooks: end as by default
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    if _State.phase != "running":  # guarded() is over: nothing is being written
        _exit_now(EXIT_TERMINATED)
    if _in_uninterruptible_code(frame):
        _redeliver_soon(signal.SIGTERM)
        return
    raise Terminated


def _take_sigterm():
    """Our SIGTERM handler while main() runs, unless SIGTERM was ignored or another handler
    is in place (the embedding program's); returns the handler replaced, or None."""
    if threading.current_thread() is not threading.main_thread():
        return None
    current = signal.getsignal(signal.SIGTERM)
    if current is not signal.SIG_DFL:
        return None
    signal.signal(signal.SIGTERM, _on_sigterm)
    _State.sigterm_owner = os.getpid()
    if not _State.fork_hooks:
        _State.fork_hooks = True
        os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                            after_in_child=_after_fork_in_child)
    return current


# A forked process (a DataLoader worker) must end on SIGTERM at once, as by default. Python
# drops the signals a child receives before its fork hooks have run, so SIGTERM is blocked
# across the fork and the child unblocks it only once SIG_DFL is in place: one that came
# in between is then delivered, and ends it.
def _ours():
    return signal.getsignal(signal.SIGTERM) is _on_sigterm and threading.current_thread() is threading.main_thread()


def _before_fork():
    if _ours():
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})


def _after_fork_in_parent():
    if _ours():
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


def _after_fork_in_child():
    if _ours():
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


def _in_uninterruptible_code(frame):
    places = set()
    for module, function in UNINTERRUPTIBLE:
        path = getattr(sys.modules.get(module), "__file__", None)
        if path:
            places.add((path, function))
    while frame is not None and places:
        if (frame.f_code.co_filename, frame.f_code.co_name) in places:
            return True
        frame = frame.f_back
    return False


def _redeliver_soon(signum):
    """The signal again in a moment, from a thread (the main thread is busy)."""
    timer = threading.Timer(REDELIVERY_DELAY, _interrupt_if_still_running, args=(signum,))
    timer.daemon = True
    timer.start()


def _write_line(line):
    try:
        print(f"warning: {line}", file=sys.stderr, flush=True)
    except (OSError, RuntimeError, ValueError):  # a closed or re-entered stream: nothing more to say
        pass


def _exit_now(code=EXIT_INTERRUPTED):
    """Flush what the tool printed and end without running more Python (a
    signal can come in the middle of an import or of the interpreter's exit)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, RuntimeError, ValueError):
            pass
    os._exit(code)


def _unraisable(previous):
    """A KeyboardInterrupt raised where Python cannot propagate it (a fork
    callback of the logging module while DataLoader workers start, a __del__)
    would be printed as "Exception ignored" and lost, and the tool would go on:
    deliver the interrupt again a moment later, from a thread, so that it is
    raised once that code has returned, where it can propagate. Once the
    interruption is reported, objects it left half-built (a DataLoader
    iterator whose workers were starting) complain as they are collected:
    that is noise after the one line, and is dropped."""
    def hook(unraisable):
        if issubclass(unraisable.exc_type, KeyboardInterrupt) and _State.phase == "running":
            _redeliver_soon(signal.SIGTERM if issubclass(unraisable.exc_type, Terminated) else signal.SIGINT)
        elif not (_State.phase == "ending" and _State.reported):
            previous(unraisable)
    return hook


def _interrupt_if_still_running(signum):
    if _State.phase != "running":  # another interrupt got through meanwhile
        return
    if hasattr(signal, "pthread_kill"):  # a real signal: it also ends a blocking call (a sleep, a queue's poll)
        signal.pthread_kill(threading.main_thread().ident, signum)
    else:
        import _thread
        _thread.interrupt_main()


@contextmanager
def guarded():
    """Run a tool's main() in the "running" phase (see the module's docstring)."""
    replaced = _install()
    replaced_sigterm = _take_sigterm()
    previous_hook = sys.unraisablehook
    sys.unraisablehook = _unraisable(previous_hook)
    _State.phase, _State.reported, _State.activity = "running", False, DEFAULT_ACTIVITY
    try:
        yield
    finally:
        _State.phase = "ending"
        if replaced_sigterm is not None:
            signal.signal(signal.SIGTERM, replaced_sigterm)
        if replaced is not _on_sigint:  # run_cli called by a program that is not a tool: leave it as it was
            sys.unraisablehook = previous_hook
            if replaced is not None:
                signal.signal(signal.SIGINT, replaced)


def mark_reported():
    """The interruption's line is out: a second Ctrl-C ends the tool without
    another line, and "Exception ignored" noise from half-built objects is dropped."""
    _State.reported = True
