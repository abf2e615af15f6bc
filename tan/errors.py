"""The one exception type for mistakes a user can fix (bad files, keys, values).

The command-line tools print these without a stack trace; anything else is a
bug and keeps its traceback.
"""


class TanError(Exception):
    """A problem with the user's input: config, files or values."""
