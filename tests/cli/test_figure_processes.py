"""A command's figure drawn by a process per format while the command works: the same bytes
as drawing it here, a failure named with its cause, and nothing left running."""

from __future__ import annotations

import pandas as pd
import pytest

from rankcollapse import plot
from rankcollapse.cli import _figures
from rankcollapse.cli._common import save_figure
from rankcollapse.cli._figures import FigureProcesses
from rankcollapse.plot.floor import floor_of


def collapse_frame() -> pd.DataFrame:
    rows = [
        (layer, sample, metric, value * 0.3**layer, False)
        for layer in range(4)
        for sample, value in enumerate((1.0, 1.5))
        for metric in ("mu_rel", "cos_mean")
    ]
    return pd.DataFrame(rows, columns=["layer", "sample", "metric", "value", "at_floor"])


@pytest.fixture
def two_cores(monkeypatch):
    """Processes start even on a one-core machine (where a command would draw in-process)."""
    monkeypatch.setattr(_figures, "cpu_cores", lambda: 2)


def test_the_processes_write_the_bytes_drawn_here(tmp_path, two_cores):
    frame, floor = collapse_frame(), floor_of(1.2e-6)
    with FigureProcesses(True) as figures:
        assert set(figures.processes) == {"png", "svg"}
        figures.draw(tmp_path / "apart" / "collapse", "layers", frame, floor=floor, title="t")
        assert figures.processes == {}
    save_figure(plot.layers(frame, floor=floor, title="t"), tmp_path / "here" / "collapse")
    for fmt in ("png", "svg"):
        apart = (tmp_path / "apart" / f"collapse.{fmt}").read_bytes()
        assert apart == (tmp_path / "here" / f"collapse.{fmt}").read_bytes(), fmt


def test_a_failed_drawing_is_raised_with_the_file_and_its_cause(tmp_path, two_cores):
    with FigureProcesses(True) as figures, pytest.raises(RuntimeError) as caught:
        figures.draw(tmp_path / "collapse", "layers", collapse_frame(), metric="no_such_metric")
    message = str(caught.value)
    assert "collapse.png" in message and "collapse.svg" in message
    assert "no_such_metric" in message
    assert not list(tmp_path.iterdir())  # no file, not even a temporary one


def test_processes_not_needed_end_with_the_block(two_cores):
    with pytest.raises(KeyError), FigureProcesses(True) as figures:  # e.g. a bad model name
        started = list(figures.processes.values())
        raise KeyError("the command failed before its figure")
    assert all(process.poll() is not None for process in started)


def test_one_core_or_figures_off_start_no_process(tmp_path, monkeypatch):
    assert FigureProcesses(False).__enter__().processes == {}
    monkeypatch.setattr(_figures, "cpu_cores", lambda: 1)
    with FigureProcesses(True) as figures:
        assert figures.processes == {}
        figures.draw(tmp_path / "collapse", "layers", collapse_frame())
    assert {p.name for p in tmp_path.iterdir()} == {"collapse.png", "collapse.svg"}
