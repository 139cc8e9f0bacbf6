"""The one place that owns the terminal: results to stdout, errors and progress to stderr."""

from __future__ import annotations

import math
import sys
import time
from typing import Self

from rich.console import Console

# A terminal that cannot show a character (PYTHONIOENCODING=ascii, a C locale) gets it escaped,
# `\xe8`, never a UnicodeEncodeError: model names and paths are the user's own text.
for _stream in (sys.stdout, sys.stderr):
    if hasattr(_stream, "reconfigure") and _stream.errors == "strict":
        _stream.reconfigure(errors="backslashreplace")

# Piped or captured output gets a wide page, so tables of many metrics are never squeezed.
_WIDTH = None if sys.stdout.isatty() else 200


class _Console(Console):
    """rich's console, but a reader that goes away early (`| head`, a pager quit with q) only
    ends what this stream shows: the rest of its output is dropped and the command finishes
    its files. (rich's own ends the process with status 1, so a probe piped into a pager
    that was quit lost its figure.)"""

    def on_broken_pipe(self) -> None:
        from rankcollapse.process import drop_output

        self.quiet = True  # nothing more to show on this stream
        drop_output(self.file)


console = _Console(soft_wrap=True, width=_WIDTH)
err_console = _Console(stderr=True, soft_wrap=True, width=_WIDTH)


INTERRUPTED = "interrupted; finished work is kept."  # said on Ctrl-C


def print_error(message: str) -> None:
    """The user's error on stderr, "error: MESSAGE", the message printed as text, never as
    markup (it quotes the user's paths and names)."""
    from rich.text import Text

    err_console.print(Text("error: ", style="bold red") + Text(message))


def notify(message: str) -> None:
    """A note for the user on stderr (a folder skipped, a lock waited for), printed as text."""
    from rich.text import Text

    err_console.print(Text("note: ", style="yellow") + Text(message))


def duration(seconds: float, lower_bound: bool = False) -> str:
    """Seconds as '42 s', '3.5 min' or '2.1 h'; '>= ' before a lower bound."""
    if math.isnan(seconds):
        return "unknown"
    at_least = ">= " if lower_bound else ""
    if seconds < 120:
        return f"{at_least}{seconds:.0f} s"
    return at_least + (f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h")


class ProgressLines:
    """Progress as a plain line on stderr per step done, where stderr is not a terminal (a log
    file, a pipe, a batch job), where a live bar shows only once it has ended: "NAME: 3 of 6
    units done, 12.0 min elapsed, about 12.0 min left" (the pace of the steps done so far,
    those already done when it started not counted)."""

    def __init__(self) -> None:
        self.live = err_console.is_terminal
        self.start: dict[str, tuple[float, float]] = {}  # name -> (time, steps done) at start
        self.said: dict[str, float] = {}  # name -> steps done in its last line

    def __call__(self, name: str, done: float, total: float, what: str) -> None:
        """Say that `name` has `done` of `total` `what` done (nothing with a live bar, nor
        twice for the same count)."""
        from rich.text import Text

        now = time.monotonic()
        started, first = self.start.setdefault(name, (now, done))
        if self.live or done <= self.said.get(name, first):
            return
        self.said[name] = done
        elapsed = now - started
        left = elapsed / (done - first) * (total - done)
        line = f"{name}: {done:g} of {total:g} {what} done, {duration(elapsed)} elapsed"
        err_console.print(Text(line + (f", about {duration(left)} left" if done < total else "")))


class PassProgress:
    """A bar on stderr over a probe's forward passes, moved on by each layer group, with the
    time elapsed and left: the `measure.layers.Progress` callback the CLI passes down. The
    layers of a pass are learnt in the first pass; later passes advance by their share. Where
    stderr is not a terminal, a line per forward pass (`ProgressLines`)."""

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
        self.name = label
        self.lines = ProgressLines()
        self.lines(label, 0, 1, "forward passes")  # the clock starts

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
            self.lines(self.name, passes_done, n_passes, "forward passes")
        self.bar.update(
            self.task,
            total=n_passes,
            completed=passes_done + share,
            description=f"{self.label}: {what}",
        )
