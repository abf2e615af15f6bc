"""What every command shares: its arguments (arguments), the checkpoints it is pointed at
(checkpoints), and how it ends: an error as a message and an exit code (exit_codes), a
Ctrl-C or SIGTERM as one line and 130 / 143 (signal_exits)."""
from tan_apps.cli.signal_exits import install_at_start

# Before anything heavy is imported (seconds): a Ctrl-C from here on ends a command
# with one line and exit status 130, not an import traceback.
install_at_start()
