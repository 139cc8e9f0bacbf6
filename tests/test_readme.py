"""The README's promises: every experiment is listed, and the two setup commands are the real ones."""

import re
from pathlib import Path

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
