"""A command's figure drawn beside its work: one process that loads the plotting libraries
and builds the empty figure while the command computes, then draws both file formats (PNG,
SVG) at once.

A probe spends its first seconds importing torch and loading its model. `FigureProcesses`
starts, at once, one Python process at the command's own priority (at nice 10, any other job on
the machine starved it while the command waited for its figure: 26.6 s from results.csv to exit
at load 3.4, against 4.3 s at its own), which meanwhile imports pandas and matplotlib, draws a
small figure and throws it away (the first figure of a process pays for fonts, backends and
first calls), and builds the empty figure of the shape the command announces (`prepare_layers`:
a panel per metric, known before the model loads). Messages come as JSON lines on its
standard input. When the numbers are written, the recipe comes (the results.csv just written,
the series, floor and title) and the command goes on (its table is printed meanwhile); the
process draws `plot.layers` of that file and lays it out once, then forks where it can, so
that each format is drawn by its own process and written atomically. The bytes are those of
drawing both here (`plot.render`: the same layout, then one draw per format). The command
waits for the figure when its block ends; a block left by an error kills the process. A
command-line process that ends there leaves the wait to its successor (`finish`, by
`process.hand_over_end`), so its memory is freed while the figure is drawn.

Measured on MiniLM's probe (12 panels, 2 shared cores, load 3-5): from results.csv written
to the command's exit 9.1 s -> 3.0 s (load 5), 5.9 s -> 2.6 s (load 3.6); after the recipe,
2.4-2.9 s -> 1.1 s of CPU until the PNG is written, 2.6-3.0 s -> 0.5 s for the SVG.

With one core, or figures off, no process starts and the figure is drawn here.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from rankcollapse.errors import RankCollapseError
from rankcollapse.plot import FORMATS
from rankcollapse.process import cpu_cores, hand_over_end, python_command

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable

    from matplotlib.figure import Figure

    from rankcollapse.plot.floor import Floor

USER_ERROR = 2  # the figure process's exit code when every failure was a RankCollapseError
_HANDED_OVER: list[subprocess.Popen] = []  # figure processes the successor waits for


class FigureProcesses:
    """The process that draws one `plot.layers` figure, started when the block is entered
    (`enabled` and at least two cores) and waited for when it is left; `draw_layers` hands it
    the recipe, or draws here without it."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.process: subprocess.Popen | None = None
        self.done: Any = ""  # the line printed once the figure is written

    def __enter__(self) -> Self:
        if self.enabled and cpu_cores() >= 2:
            import subprocess

            self.process = subprocess.Popen(
                python_command(f"from {__name__} import main; main()"),
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
        return self

    def __exit__(self, error: type[BaseException] | None, *exc: object) -> None:
        if error is None and not self._hand_over():
            self.wait()
        elif self.process is not None:  # not drawn (an error came first): not needed
            self.process.kill()
            _ended(self.process)
        self.process = None

    def prepare_layers(self, *, n_metrics: int, n_series: int) -> None:
        """Tell the process the shape of the coming `draw_layers` figure (as soon as the
        command knows it, before it computes), so that it builds the empty figure meanwhile
        (`plot.curves.prepare_layers`); without a process, nothing."""
        self._send({"prepare": {"n_metrics": n_metrics, "n_series": n_series}})

    def _send(self, message: dict[str, Any], *, last: bool = False) -> None:
        """One JSON line to the process (then its input closed if `last`)."""
        if self.process is None:
            return
        stdin: Any = self.process.stdin  # a pipe: Popen was given stdin=PIPE
        try:
            stdin.write(json.dumps(message).encode() + b"\n")
            stdin.flush()
            if last:
                stdin.close()
        except BrokenPipeError:  # it has ended already: `wait` says why
            pass

    def draw_layers(
        self, results: Path, stem: Path, *, by: str | None, floor: Floor, title: str
    ) -> None:
        """`stem`.png and `stem`.svg: `plot.layers` of the `results` CSV (what the figure
        shows is what the file holds), with `by`, `floor` and `title`; drawn here, or handed
        to the process and written by the time the block ends (`wait`)."""
        from rich.text import Text

        from rankcollapse.cli._console import console

        recipe = {"results": str(results), "stem": str(stem), "by": by, "title": title,
                  "floor": [floor.value, floor.label]}  # fmt: skip
        done = Text(f"wrote {stem.with_name(stem.name + '.png')} (+ .svg)")
        if self.process is None:
            draw(recipe, FORMATS)
            console.print(done)
            return
        self.done = done
        self._send(recipe, last=True)  # the process starts drawing

    def _hand_over(self) -> bool:
        """Leave the wait for the figure handed to the process to this process's successor,
        where it has one (`process.hand_over_end`, then `finish`): the system frees this
        process's memory (a model, torch) while the figure is drawn, not after it."""
        if self.process is None or not self.done:
            return False
        stderr = os.dup(self.process.stderr.fileno())  # type: ignore[union-attr]  # a pipe
        pid, done = str(self.process.pid), str(self.done)
        if not hand_over_end(f"{__name__}:finish", pid, str(stderr), done, fds=[stderr]):
            os.close(stderr)
            return False
        _HANDED_OVER.append(self.process)  # kept: a Popen let go may be reaped by another
        self.process = None
        return True

    def wait(self) -> None:
        """Wait for the figure handed to the process, then say it is written (`_said`).
        Without a figure, end the process."""
        process, self.process = self.process, None
        if process is None:
            return
        if not self.done:
            process.kill()
        stderr = _ended(process)
        if self.done:
            _said(process.returncode, stderr, self.done)


def _said(returncode: int, stderr: bytes, done: Any) -> None:
    """Say that the figure is written (`done`), from the figure process's exit code and what
    it said on stderr; a failure is raised: a RankCollapseError for a reason of the user's
    (a full disk), else a RuntimeError with the traceback (a defect)."""
    from rankcollapse.cli._console import console

    what = stderr.decode(errors="replace").strip()
    if returncode == USER_ERROR:
        raise RankCollapseError(f"the figure was not drawn: {what}")
    if returncode:
        raise RuntimeError(f"drawing the figure failed: {what}")
    console.print(done)


def finish(status: int, pid: str, stderr: str, done: str) -> int:
    """The end of a command that left the wait for its figure to its successor
    (`FigureProcesses._hand_over`), run there: wait for the figure process `pid` (reading its
    `stderr` pipe), say what `wait` says, the user's error as the command line says it;
    returns the command's `status`, or the figure's failure's."""
    from rich.text import Text

    from rankcollapse.cli._console import INTERRUPTED, print_error

    try:
        with os.fdopen(int(stderr), "rb") as pipe:
            said = pipe.read()
        returncode = os.waitstatus_to_exitcode(os.waitpid(int(pid), 0)[1])
        _said(returncode, said, Text(done))
    except RankCollapseError as err:
        print_error(str(err))
        return status or 2
    except KeyboardInterrupt:
        print(INTERRUPTED, file=sys.stderr)
        return 130
    return status


def _ended(process: subprocess.Popen) -> bytes:
    """What `process` said on stderr, once it has ended (its input closed first)."""
    stdin: Any = process.stdin  # pipes: Popen was given PIPE for both
    err: Any = process.stderr
    if not stdin.closed:
        stdin.close()
    stderr = err.read()
    err.close()
    process.wait()
    return stderr


def draw(recipe: dict[str, Any], formats: tuple[str, ...]) -> None:
    """Draw a `draw_layers` recipe and write each of its `formats` atomically."""
    _write(_figure(recipe), recipe, formats)


def _figure(recipe: dict[str, Any]) -> Figure:
    """The recipe's `plot.layers` figure, laid out (`plot.style.lay_out`)."""
    from rankcollapse import plot
    from rankcollapse.plot.floor import Floor
    from rankcollapse.plot.style import lay_out
    from rankcollapse.report.stored import read_results

    figure = plot.layers(
        read_results(recipe["results"]),
        by=recipe["by"],
        floor=Floor(*recipe["floor"]),
        title=recipe["title"],
    )
    lay_out(figure)
    return figure


def _write(figure: Figure, recipe: dict[str, Any], formats: tuple[str, ...]) -> None:
    from rankcollapse import plot
    from rankcollapse.files import write_atomic

    stem = Path(recipe["stem"])
    for fmt, data in plot.render(figure, formats).items():
        write_atomic(stem.with_name(f"{stem.name}.{fmt}"), data)


def draw_apart(recipe: dict[str, Any]) -> int:
    """Build and lay out the recipe's figure once, then draw each format in its own process
    where this system forks (this one draws the first, a child each other): 0, or USER_ERROR
    when every failure was a RankCollapseError, else 1; each failure is said on stderr after
    its files' names."""
    figure, code = _attempt(recipe, FORMATS, _figure, recipe)
    if figure is None:
        return code
    children = []
    mine: tuple[str, ...] = FORMATS
    if hasattr(os, "fork"):
        for fmt in FORMATS[1:]:
            pid = os.fork()
            if pid == 0:  # a child: its format, then out without running the parent's exits
                os._exit(_attempt(recipe, (fmt,), _write, figure, recipe, (fmt,))[1])
            children.append(pid)
        mine = FORMATS[:1]
    codes = [_attempt(recipe, mine, _write, figure, recipe, mine)[1]]
    codes += [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children]
    failed = [code for code in codes if code]
    if not failed:
        return 0
    return USER_ERROR if all(code == USER_ERROR for code in failed) else 1


def _attempt(
    recipe: dict[str, Any], formats: tuple[str, ...], work: Callable[..., Any], *args: Any
) -> tuple[Any, int]:
    """(what `work(*args)` returned, 0), or (None, code) with the failure said on stderr
    after the recipe's files of `formats` (a RankCollapseError as its sentence, USER_ERROR;
    anything else with its traceback, 1)."""
    import traceback

    stem = Path(recipe["stem"]).name
    files = ", ".join(f"{stem}.{fmt}" for fmt in formats)
    try:
        return work(*args), 0
    except RankCollapseError as err:
        message, code = str(err), USER_ERROR
    except Exception:  # noqa: BLE001 - a defect: its traceback goes back to the command
        message, code = traceback.format_exc(), 1
    sys.stderr.write(f"{files}: {message}\n")
    sys.stderr.flush()
    return None, code


class _Messages:
    """The parent's JSON lines on stdin, read as they come: a `prepare_layers` message is
    acted on when read, the recipe kept; `waiting` says without blocking whether the recipe
    (or the end of the input) has come, `recipe` waits for it."""

    def __init__(self) -> None:
        self.buffer = b""
        self.ended = False
        self.pending: dict[str, Any] | None = None

    def _read(self) -> None:
        chunk = os.read(sys.stdin.fileno(), 1 << 16)
        self.buffer += chunk
        self.ended = not chunk
        while self.pending is None and b"\n" in self.buffer:
            line, _, self.buffer = self.buffer.partition(b"\n")
            message = json.loads(line)
            if "prepare" in message:
                from rankcollapse.plot.curves import prepare_layers

                prepare_layers(**message["prepare"])
            else:
                self.pending = message

    def waiting(self) -> bool:
        import select

        if os.name == "nt":  # select takes no pipe there: no warm-up, as before it
            return True
        while not self.ended and select.select([sys.stdin], [], [], 0)[0]:
            self._read()
        return self.pending is not None or self.ended

    def recipe(self) -> dict[str, Any] | None:
        """The recipe, once it has come; None when the input ends without one."""
        while self.pending is None and not self.ended:
            self._read()
        return self.pending


def _warm_up(messages: _Messages) -> None:
    """Draw a small figure of the same kinds (log and linear panels, mathtext, floor markers,
    legend, both formats) and throw it away, while the command computes: the first figure of
    a process pays for fonts, the mathtext grammar, the backends and pandas' first calls
    (about half its time); the recipe's figure then does not. Stops at the first step after
    the recipe has come."""
    import pandas as pd

    from rankcollapse import plot

    rows = [  # two series, a log and a linear panel, some rows at the floor
        (variant, layer, sample, metric, 0.5**layer, metric == "mu_rel" and layer + sample > 2)
        for variant in ("a", "b")
        for layer in range(3)
        for sample in range(2)
        for metric in ("mu_rel", "cos_mean")
    ]
    columns = ["variant", "layer", "sample", "metric", "value", "at_floor"]
    if messages.waiting():
        return
    frame = pd.DataFrame(rows, columns=columns)
    # a width of its own: it never takes the figure prepared for the recipe
    figure = plot.layers(frame, floor=1e-6, title="warm-up", width=5.0)
    for fmt in FORMATS:
        if messages.waiting():
            return
        plot.render(figure, (fmt,))


def main() -> None:
    """The figure process: load the plotting libraries and warm them up (`_warm_up`), then
    draw the one recipe on stdin (`draw_apart`) and exit with its code. Ctrl-C, which reaches
    the whole process group, exits quietly (the parent reports it)."""
    from rankcollapse.process import fast_imports, skip_teardown

    fast_imports()
    try:
        # matplotlib (plot.layers, plot.render) and pandas (the CSV reader), loaded while the
        # parent loads a model
        for module in ("plot.curves", "plot.style", "report.stored"):
            importlib.import_module(f"rankcollapse.{module}")
        messages = _Messages()
        _warm_up(messages)
        recipe = messages.recipe()
        sys.exit(skip_teardown(draw_apart(recipe) if recipe is not None else 0))
    except KeyboardInterrupt:
        sys.exit(130)
