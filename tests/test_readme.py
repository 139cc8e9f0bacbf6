"""The README's promises: every experiment is listed, the two setup commands are the real ones,
and every Python block runs as written (blocks needing an extra skip with the reason), alone
and all in order in one folder, where no block's logged rows are lost."""

import importlib.util
import re
import tomllib
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from rankcollapse.experiments import experiment_names

ROOT = Path(__file__).resolve().parents[1]
HEADER = "| experiment | paper | what it measures |"


def test_readme_lists_every_registered_experiment():
    readme = (ROOT / "README.md").read_text()
    missing = [name for name in experiment_names() if f"`{name}`" not in readme]
    assert missing == []


def test_ci_runs_the_readme_test_command_and_make_defines_both():
    readme = (ROOT / "README.md").read_text()
    assert "make demo" in readme and "make test" in readme
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    makefile = (ROOT / "Makefile").read_text()
    assert "\ndemo:" in makefile and "\ntest:" in makefile
    assert "torch==2.13.0" in makefile


def test_readme_experiment_table_gives_quick_and_paper_times_for_every_experiment():
    lines = (ROOT / "README.md").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(HEADER))
    assert lines[start] == HEADER + " quick run | paper preset |"
    rows = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0].strip("`")] = cells
    assert sorted(rows) == experiment_names()
    time = r"(< 1 s|\d+ s|\d+\.\d (min|h))"
    for name, cells in rows.items():
        assert len(cells) == 5, name
        assert re.fullmatch(f"{time}|not run", cells[3]), (name, cells[3])
        not_run = r"not run( \(\d+ of \d+ units stored\))?"
        assert re.fullmatch(f"~?{time}( \\(estimate\\))?|{not_run}", cells[4]), (name, cells[4])
        assert cells[4].startswith("~") == cells[4].endswith("(estimate)"), (name, cells[4])


@dataclass(frozen=True)
class Block:
    """A Python block of the README: where it starts and the extras it needs."""

    line: int
    needs: tuple[str, ...]
    code: str


FENCE = re.compile(
    r"(?:<!-- needs: (?P<needs>[\w, -]+) -->\n)?```python\n(?P<code>.*?)^```",
    re.DOTALL | re.MULTILINE,
)
MODULE_OF_EXTRA = {"lightning": "lightning", "tensorboard": "tensorboard", "wandb": "wandb",
                   "mlflow": "mlflow", "nnsight": "nnsight", "transformer-lens": "transformer_lens",
                   "ray": "ray"}  # fmt: skip


def python_blocks() -> list[Block]:
    readme = (ROOT / "README.md").read_text()
    return [
        Block(
            readme.count("\n", 0, m.start("code")) + 1,
            tuple(n.strip() for n in (m["needs"] or "").split(",") if n.strip()),
            m["code"],
        )
        for m in FENCE.finditer(readme)
    ]


def test_every_python_block_is_found_and_its_extras_are_the_project_s():
    readme = (ROOT / "README.md").read_text()
    blocks = python_blocks()
    assert len(blocks) == readme.count("```python")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for block in blocks:
        assert set(block.needs) <= set(extras) & set(MODULE_OF_EXTRA), block.line


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("block", python_blocks(), ids=lambda b: f"README.md-line-{b.line}")
def test_a_readme_python_block_runs_as_written(block, tmp_path, monkeypatch):
    """Each block alone, in a fresh namespace and an empty folder: its imports written out."""
    for extra in block.needs:
        pytest.importorskip(
            MODULE_OF_EXTRA[extra],
            reason=f'this README block needs the {extra} extra (pip install -e ".[{extra}]")',
        )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    code = compile(block.code, f"README.md, line {block.line}", "exec")
    exec(code, {"__name__": "readme"})  # noqa: S102 (the README's own code, as a reader runs it)


def _kept(log: Any, frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of `frame` (one measurement) that `log` holds now, compared on every column."""
    from rankcollapse.measure.monitor import CsvLog, MemoryLog, read_log
    from rankcollapse.tracking import MLflowLog

    if isinstance(log, CsvLog):
        held = read_log(log.path)
    elif isinstance(log, MLflowLog):  # its collapse-rows.csv once closed, else its memory
        held = log.stored_rows() if len(log.stored_rows()) else log.frame
    elif isinstance(log, MemoryLog):  # also WandbLog: an offline run cannot be read back
        held = log.frame
    else:
        return frame  # TensorBoard's means are checked in tests/measure/monitor/test_logs.py
    keys = ["step", "layer", "variant", "sample", "metric"]
    both = frame.merge(held.astype({"layer": int, "sample": int}), on=keys, suffixes=("", "_held"))
    same = (both["value"] - both["value_held"]).abs() <= 1e-12 * both["value"].abs()
    return both[same | (both["value"].isna() & both["value_held"].isna())]


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_the_readme_python_blocks_run_in_order_in_one_folder_and_keep_every_block_s_rows(
    tmp_path, monkeypatch
):
    """What a reader does: every block, in order, in one folder (blocks needing an extra that
    is missing are left out, named). After each block, every measurement of every monitor so
    far is still in each of its logs: no block replaced or dropped another's rows."""
    from rankcollapse.measure.monitor import Monitor

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    measured: list[tuple[int, list[Any], pd.DataFrame]] = []
    step = Monitor.step

    def recorded(monitor: Monitor, at: int) -> pd.DataFrame | None:
        frame = step(monitor, at)
        if frame is not None:  # a measurement: its rows, and the logs they went to
            measured.append((block.line, list(monitor.logs), frame))
        return frame

    monkeypatch.setattr(Monitor, "step", recorded)
    missing = []
    for block in python_blocks():
        absent = [e for e in block.needs if importlib.util.find_spec(MODULE_OF_EXTRA[e]) is None]
        if absent:
            missing.append((block.line, absent))
            continue
        before = len(measured)
        code = compile(block.code, f"README.md, line {block.line}", "exec")
        exec(code, {"__name__": "readme"})  # noqa: S102 (the README's own code, in order)
        if "watch(" in block.code:
            assert len(measured) > before, f"README.md line {block.line} measured nothing"
        for line, logs, frame in measured:
            for log in logs:
                kept = _kept(log, frame)
                assert len(kept) == len(frame), (
                    f"after README.md line {block.line}: {type(log).__name__} of the block at "
                    f"line {line} lost {len(frame) - len(kept)} of its {len(frame)} rows at "
                    f"step {frame['step'].iloc[0]}"
                )
    if missing:  # said, not hidden: the blocks that ran kept their rows
        warnings.warn(f"README blocks left out for missing extras: {missing}", stacklevel=1)
