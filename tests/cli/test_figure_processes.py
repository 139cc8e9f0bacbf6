"""A command's figure drawn by one process (forked per format) while the command works: the
bytes of drawing it here, from the results.csv the command wrote, written by the end of the
block; a failure named with its file and cause; and nothing left running."""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest

from rankcollapse import plot
from rankcollapse.cli import _figures
from rankcollapse.cli._common import save_figure
from rankcollapse.cli._figures import FigureProcesses
from rankcollapse.errors import RankCollapseError
from rankcollapse.plot.floor import floor_of

FLOOR = floor_of(1.2e-6)


def results_csv(folder) -> pd.DataFrame:
    """A probe-like frame, written to folder/results.csv as a command writes it."""
    rows = [
        ("minilm", variant, layer, sample, metric, value * 0.3**layer, False)
        for variant in ("san", "transformer")
        for layer in range(4)
        for sample, value in enumerate((1.0, 1.5))
        for metric in ("mu_rel", "cos_mean")
    ]
    columns = ["model", "variant", "layer", "sample", "metric", "value", "at_floor"]
    frame = pd.DataFrame(rows, columns=columns)
    folder.mkdir(parents=True, exist_ok=True)
    frame.to_csv(folder / "results.csv", index=False)
    return frame


@pytest.fixture
def two_cores(monkeypatch):
    """Processes start even on a one-core machine (where a command would draw in-process)."""
    monkeypatch.setattr(_figures, "cpu_cores", lambda: 2)


@pytest.mark.parametrize("prepared", [False, True], ids=["as-drawn", "prepared-ahead"])
def test_the_processes_write_the_bytes_of_the_frame_drawn_here(tmp_path, two_cores, prepared):
    frame = results_csv(tmp_path)
    with FigureProcesses(True) as figures:
        assert figures.process is not None
        if prepared:  # the empty figure built while the command computes
            figures.prepare_layers(n_metrics=2, n_series=2)
        figures.draw_layers(
            tmp_path / "results.csv", tmp_path / "apart", by="variant", floor=FLOOR, title="t"
        )
    assert figures.process is None
    save_figure(plot.layers(frame, by="variant", floor=FLOOR, title="t"), tmp_path / "here")
    for fmt in ("png", "svg"):
        apart = (tmp_path / f"apart.{fmt}").read_bytes()
        assert apart == (tmp_path / f"here.{fmt}").read_bytes(), fmt


def test_a_failed_drawing_is_raised_with_the_file_and_its_cause(tmp_path, two_cores):
    results_csv(tmp_path)
    with pytest.raises(RuntimeError) as caught, FigureProcesses(True) as figures:
        figures.draw_layers(  # a formula matplotlib cannot lay out: a defect, not the user's
            tmp_path / "results.csv", tmp_path / "collapse", by=None, floor=FLOOR,
            title=r"$\no_such_command$",
        )  # fmt: skip
    message = str(caught.value)
    assert "collapse.png" in message and "collapse.svg" in message
    assert "no_such_command" in message and "Traceback" in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.csv"]  # no temporary file


def test_a_reason_for_the_user_comes_back_as_its_sentence_not_a_traceback(tmp_path, two_cores):
    (tmp_path / "results.csv").write_text("layer,metric,value\n")  # a header and no rows
    with pytest.raises(RankCollapseError) as caught, FigureProcesses(True) as figures:
        figures.draw_layers(
            tmp_path / "results.csv", tmp_path / "collapse", by=None, floor=FLOOR, title="t"
        )
    message = str(caught.value)
    assert "a header and no rows" in message and "results.csv" in message
    assert "Traceback" not in message


def test_processes_not_needed_end_with_the_block(two_cores):
    with pytest.raises(KeyError), FigureProcesses(True) as figures:  # e.g. a bad model name
        started = figures.process
        raise KeyError("the command failed before its figure")
    assert started.poll() is not None and figures.process is None


def test_a_block_that_drew_nothing_ends_its_process(two_cores):
    with FigureProcesses(True) as figures:
        started = figures.process
    assert started.poll() is not None


def test_one_core_or_figures_off_start_no_process(tmp_path, monkeypatch):
    with FigureProcesses(False) as figures:
        assert figures.process is None
    monkeypatch.setattr(_figures, "cpu_cores", lambda: 1)
    results_csv(tmp_path)
    with FigureProcesses(True) as figures:
        assert figures.process is None
        figures.draw_layers(
            tmp_path / "results.csv", tmp_path / "collapse", by=None, floor=FLOOR, title="t"
        )
    assert {p.name for p in tmp_path.iterdir()} == {"results.csv", "collapse.png", "collapse.svg"}


COMMAND = """
import sys
from pathlib import Path

from rankcollapse import process
from rankcollapse.cli import _figures
from rankcollapse.plot.floor import floor_of

process.fast_imports()
process.ends_after_command()  # as the console script: the process ends with the command
_figures.cpu_cores = lambda: 2  # the figure process starts even on one core
folder, title, interpreter = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
with _figures.FigureProcesses(True) as figures:
    figures.draw_layers(
        folder / "results.csv", folder / "collapse", by=None, floor=floor_of(1e-6), title=title
    )
print("block left", flush=True)
sys.executable = interpreter or sys.executable
sys.exit(process.skip_teardown(0))
"""


def command(folder, title: str, interpreter: str = "") -> subprocess.CompletedProcess:
    """A command-line process that hands its figure to a figure process (COMMAND)."""
    return subprocess.run(
        [sys.executable, "-c", COMMAND, str(folder), title, interpreter],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.skipif(os.name != "posix", reason="a process is replaced in place only on POSIX")
@pytest.mark.parametrize("interpreter", ["", "/no/such/python"], ids=["exec", "no-interpreter"])
def test_a_command_process_leaves_the_wait_for_its_figure_to_its_successor(tmp_path, interpreter):
    frame = results_csv(tmp_path)
    ended = command(tmp_path, "t", interpreter)
    assert ended.returncode == 0, ended.stderr
    # said after the block was left: by the successor (or, with no interpreter to start, by
    # the same work done in this process), which waited for the files
    assert ended.stdout.split("\n")[:2] == [
        "block left",
        f"wrote {tmp_path / 'collapse.png'} (+ .svg)",
    ]
    save_figure(plot.layers(frame, floor=floor_of(1e-6), title="t"), tmp_path / "here")
    for fmt in ("png", "svg"):
        assert (tmp_path / f"collapse.{fmt}").read_bytes() == (
            tmp_path / f"here.{fmt}"
        ).read_bytes()


@pytest.mark.skipif(os.name != "posix", reason="a process is replaced in place only on POSIX")
def test_the_successor_says_a_failed_figure_as_the_command_would(tmp_path):
    (tmp_path / "results.csv").write_text("layer,metric,value\n")  # a header and no rows
    ended = command(tmp_path, "t")
    assert ended.returncode == 2 and ended.stdout == "block left\n"
    assert ended.stderr.startswith("error: the figure was not drawn: ")
    assert "a header and no rows" in ended.stderr and "Traceback" not in ended.stderr
    results_csv(tmp_path)
    ended = command(tmp_path, r"$\no_such_command$")  # a defect: its traceback
    assert ended.returncode == 1
    assert "drawing the figure failed" in ended.stderr and "no_such_command" in ended.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.csv"]
