"""A command's figure drawn by one process (forked per format) while the command works: the
bytes of drawing it here, from the results.csv the command wrote, written by the end of the
block; a failure named with its file and cause; and nothing left running."""

from __future__ import annotations

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
