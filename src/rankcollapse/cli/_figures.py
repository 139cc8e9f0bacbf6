"""A command's figure drawn beside its work: one process per file format (PNG, SVG).

A probe spends its first seconds on one core, importing torch and loading its model.
`FigureProcesses` starts, at once, a Python process per format; each imports pandas and
matplotlib on another core meanwhile and then waits. When the numbers are written, each gets
the figure's recipe through its standard input (JSON: the results.csv just written, the
series, floor and title), draws `plot.layers` of that file and writes its own format
atomically, both formats at the same time. The bytes are those of drawing both here
(`plot.render` computes the layout by the same Agg pass).

The processes run at a lower priority (nice 10), so the command's own work comes first while
both run; a block left before its figure (an error) kills them. Measured on MiniLM's probe
(2 cores): the figure's wait after the numbers fell from 1.5 s (imports, then the PNG, then
the SVG) to 0.72-0.76 s. With one core, or figures off, no process starts and the figure is
drawn here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Self

import rankcollapse
from rankcollapse.errors import RankCollapseError
from rankcollapse.plot import FORMATS
from rankcollapse.plot.floor import Floor
from rankcollapse.process import cpu_cores

USER_ERROR = 2  # a figure process's exit code for a RankCollapseError, its sentence on stderr


class FigureProcesses:
    """Processes that draw one `plot.layers` figure, started when the block is entered
    (`enabled` and at least two cores), ended when it is left; `draw_layers` uses them, or
    draws here without them."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.processes: dict[str, subprocess.Popen] = {}

    def __enter__(self) -> Self:
        if self.enabled and cpu_cores() >= 2:
            # this package where the interpreter's own path lacks it (a source tree); appended,
            # so it never shadows the standard library
            root = str(Path(rankcollapse.__file__).resolve().parents[1])
            start = f"import sys; {root!r} in sys.path or sys.path.append({root!r}); "
            for fmt in FORMATS:
                code = start + f"from {__name__} import main; main({fmt!r})"
                self.processes[fmt] = subprocess.Popen(
                    [sys.executable, "-c", code],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                )
        return self

    def __exit__(self, *exc: object) -> None:
        for process in self.processes.values():  # not drawn (an error came first): not needed
            process.kill()
            process.communicate()
        self.processes.clear()

    def draw_layers(
        self, results: Path, stem: Path, *, by: str | None, floor: Floor, title: str
    ) -> None:
        """`stem`.png and `stem`.svg: `plot.layers` of the `results` CSV (what the figure
        shows is what the file holds), with `by`, `floor` and `title`."""
        recipe = {"results": str(results), "stem": str(stem), "by": by, "title": title,
                  "floor": [floor.value, floor.label]}  # fmt: skip
        if not self.processes:
            draw(recipe, FORMATS)
            return
        text = json.dumps(recipe).encode()
        # each process reads its recipe and its stderr is drained at once: none waits on another
        with ThreadPoolExecutor(len(self.processes)) as pool:
            ends = pool.map(lambda p: (p, p.communicate(text)[1]), self.processes.values())
            failed = {
                fmt: (process.returncode, stderr.decode(errors="replace").strip())
                for fmt, (process, stderr) in zip(self.processes, ends, strict=True)
                if process.returncode
            }
        self.processes.clear()
        if failed:
            what = "; ".join(
                f"{stem.name}.{fmt}: {message}" for fmt, (_, message) in failed.items()
            )
            if all(code == USER_ERROR for code, _ in failed.values()):  # e.g. a full disk
                raise RankCollapseError(f"the figure was not drawn: {what}")
            raise RuntimeError(f"drawing the figure failed: {what}")  # a defect: its traceback


def draw(recipe: dict[str, Any], formats: tuple[str, ...]) -> None:
    """Draw a `draw_layers` recipe and write each of its `formats` atomically."""
    from rankcollapse import plot
    from rankcollapse.files import write_atomic
    from rankcollapse.report.stored import read_results

    figure = plot.layers(
        read_results(recipe["results"]),
        by=recipe["by"],
        floor=Floor(*recipe["floor"]),
        title=recipe["title"],
    )
    stem = Path(recipe["stem"])
    for fmt, data in plot.render(figure, formats).items():
        write_atomic(stem.with_name(f"{stem.name}.{fmt}"), data)


def main(fmt: str) -> None:
    """A figure process: load the plotting libraries, then draw the one recipe on stdin. A
    RankCollapseError (a full disk, a damaged results.csv) exits with USER_ERROR and its
    sentence; Ctrl-C, which reaches the whole process group, exits quietly (the parent
    reports it)."""
    from rankcollapse.process import fast_imports

    if hasattr(os, "nice"):
        os.nice(10)  # the parent's work comes first while both run
    fast_imports()
    try:
        from rankcollapse import plot
        from rankcollapse.report import stored  # noqa: F401  (pandas, the CSV reader)

        plot.render, plot.layers  # noqa: B018  (load matplotlib while the parent loads a model)
        recipe = sys.stdin.buffer.read()
        if recipe:
            draw(json.loads(recipe), (fmt,))
    except KeyboardInterrupt:
        sys.exit(130)
    except RankCollapseError as err:
        print(err, file=sys.stderr)
        sys.exit(USER_ERROR)
