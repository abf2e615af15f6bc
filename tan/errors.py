"""The exceptions that end a run on purpose; the CLI maps each to an exit code.

``TanError`` is for mistakes a user can fix (bad files, keys, values): the
tools print it without a stack trace and exit 2. The others end a training
run in a known state. Anything else is a bug and keeps its traceback.

| exception           | exit code      | what is on disk                                   |
|---------------------|----------------|---------------------------------------------------|
| TanError            | 2              | nothing written, or earlier outputs left as they were |
| NonFiniteLossError  | 3              | the last good checkpoint, untouched               |
| TrainingInterrupted | 128 + signal   | a resumable checkpoint of the step it stopped at  |
| (peer failure)      | 4              | the last checkpoint (tan_apps/cli/exit_codes.py)  |
"""
import signal


class TanError(Exception):
    """A problem with the user's input: config, files or values. ``details``: more lines for the
    user, printed before the message (which stays the last line), e.g. the traceback of a plug-in's
    own code that failed."""

    def __init__(self, *args, details=None):
        super().__init__(*args)
        self.details = details


class UnknownVideoError(TanError):
    """A video asked for (by prediction) is in none of the feature files looked in."""


class NonFiniteLossError(FloatingPointError):
    """The loss became NaN or infinite; the run stops without saving."""


class TrainingInterrupted(Exception):
    """Training stopped on a signal after saving ``checkpoint``."""

    def __init__(self, signum, checkpoint, epoch, iteration):
        self.signum, self.checkpoint = signum, checkpoint
        name = signal.Signals(signum).name
        super().__init__(f"interrupted by {name} in epoch {epoch} after iteration {iteration}; saved {checkpoint}. "
                         f"Run the same command again to resume from there.")
