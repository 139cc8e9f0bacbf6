"""A command's figure drawn beside its work: one process per file format (PNG, SVG).

A probe spends its first seconds on one core, importing torch and loading its model.
`FigureProcesses` starts, at once, a Python process per format; each imports pandas and
matplotlib on another core meanwhile and then waits. When the numbers are written, each gets
the figure's recipe (a `rankcollapse.plot` function's name and arguments, pickled through its
standard input), draws it, and writes its file atomically, both formats at the same time. The
bytes are those of `save_figure` (`plot.render` computes the layout by the same Agg pass).

The processes run at a lower priority (nice 10), so the command's own work comes first while
both run; a block left before its figure (an error) kills them. Measured on MiniLM's probe
(2 cores): the figure's wait after the numbers fell from 1.5 s (imports, then the PNG, then
the SVG) to about 0.9 s. With one core, or figures off, no process starts and the figure is
drawn here.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Self

import rankcollapse
from rankcollapse.process import cpu_cores

FORMATS = ("png", "svg")  # as plot.style.FORMATS, which this module must not import (matplotlib)


class FigureProcesses:
    """Processes that draw one figure, started when the block is entered (`enabled` and at
    least two cores), ended when it is left; `draw` uses them, or draws here without them."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.processes: dict[str, subprocess.Popen] = {}

    def __enter__(self) -> Self:
        if self.enabled and cpu_cores() >= 2:
            package_root = str(Path(rankcollapse.__file__).resolve().parents[1])
            path = os.environ.get("PYTHONPATH")
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, path]))}
            for fmt in FORMATS:
                self.processes[fmt] = subprocess.Popen(
                    [sys.executable, "-m", __name__, fmt],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    env=env,
                )
        return self

    def __exit__(self, *exc: object) -> None:
        for process in self.processes.values():  # not drawn (an error came first): not needed
            process.kill()
            process.communicate()
        self.processes.clear()

    def draw(self, stem: Path, function: str, *args: Any, **kwargs: Any) -> None:
        """`stem`.png and `stem`.svg of `rankcollapse.plot.<function>(*args, **kwargs)`."""
        if not self.processes:
            from rankcollapse import plot
            from rankcollapse.cli._common import save_figure

            save_figure(getattr(plot, function)(*args, **kwargs), stem)
            return
        recipe = pickle.dumps((stem, function, args, kwargs))
        # each process reads its recipe and its stderr is drained at once: none waits on another
        with ThreadPoolExecutor(len(self.processes)) as pool:
            ends = pool.map(lambda p: (p, p.communicate(recipe)[1]), self.processes.values())
            failures = [
                f"{stem.name}.{fmt}: {stderr.decode(errors='replace').strip()}"
                for fmt, (process, stderr) in zip(self.processes, ends, strict=True)
                if process.returncode
            ]
        self.processes.clear()
        if failures:
            raise RuntimeError("drawing the figure failed:\n" + "\n".join(failures))


def main(fmt: str) -> None:
    """A figure process: load the plotting libraries, then draw the one recipe on stdin."""
    from rankcollapse.process import fast_imports

    if hasattr(os, "nice"):
        os.nice(10)  # the parent's work comes first while both run
    fast_imports()
    import pandas  # noqa: F401  (the recipe's frame)

    from rankcollapse import plot
    from rankcollapse.files import write_atomic

    plot.render, plot.layers  # noqa: B018  (import matplotlib while the parent loads its model)
    recipe = sys.stdin.buffer.read()
    if not recipe:
        return
    stem, function, args, kwargs = pickle.loads(recipe)  # from our own parent, never a file
    figure = getattr(plot, function)(*args, **kwargs)
    write_atomic(stem.with_name(f"{stem.name}.{fmt}"), plot.render(figure, (fmt,))[fmt])


if __name__ == "__main__":
    try:
        main(sys.argv[1])
    except KeyboardInterrupt:  # Ctrl-C reaches the whole process group: the parent reports it
        sys.exit(130)
