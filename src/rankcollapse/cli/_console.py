"""The one place that owns the terminal: results to stdout, errors and progress to stderr."""

import sys

from rich.console import Console

# A terminal that cannot show a character (PYTHONIOENCODING=ascii, a C locale) gets it escaped,
# `\xe8`, never a UnicodeEncodeError: model names and paths are the user's own text.
for _stream in (sys.stdout, sys.stderr):
    if hasattr(_stream, "reconfigure") and _stream.errors == "strict":
        _stream.reconfigure(errors="backslashreplace")

# Piped or captured output gets a wide page, so tables of many metrics are never squeezed.
_WIDTH = None if sys.stdout.isatty() else 200

console = Console(soft_wrap=True, width=_WIDTH)
err_console = Console(stderr=True, soft_wrap=True, width=_WIDTH)


def notify(message: str) -> None:
    """A note for the user on stderr (a folder skipped, a lock waited for), printed as text."""
    from rich.text import Text

    err_console.print(Text("note: ", style="yellow") + Text(message))
