"""The one place that owns the terminal: results to stdout, errors and progress to stderr."""

from __future__ import annotations

import sys
from typing import Self

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


class PassProgress:
    """A bar on stderr over a probe's forward passes, moved on by each layer group, with the
    time elapsed and left: the `measure.layers.Progress` callback the CLI passes down. The
    layers of a pass are learnt in the first pass; later passes advance by their share."""

    def __init__(self, label: str) -> None:
        from rich.progress import (
            BarColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.markup import escape

        self.label = escape(label)  # a model's path is text, never markup
        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TimeElapsedColumn(),
            TextColumn("left"),
            TimeRemainingColumn(),
            console=err_console,
        )
        self.task = self.bar.add_task(f"{self.label}: loading the inputs", total=None)
        self.per_pass = 0  # state layers of one pass (0: not known yet)

    def __enter__(self) -> Self:
        self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()

    def __call__(self, passes_done: int, n_passes: int, layers_done: int) -> None:
        if passes_done == 0:
            self.per_pass = max(self.per_pass, layers_done)
        share = min(layers_done / self.per_pass, 1.0) if self.per_pass and passes_done else 0.0
        if layers_done:
            what = f"pass {passes_done + 1} of {n_passes}, {layers_done} layers measured"
        else:
            what = f"{passes_done} of {n_passes} forward passes done"
        self.bar.update(
            self.task,
            total=n_passes,
            completed=passes_done + share,
            description=f"{self.label}: {what}",
        )
