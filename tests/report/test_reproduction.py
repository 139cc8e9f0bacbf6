"""The reproduction table reads stored runs: paper runs first, findings only, 'not run' rows."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rankcollapse.cli import main
from rankcollapse.errors import InputError
from rankcollapse.experiments import experiment_names
from rankcollapse.report import reproduction_table


def _claim(id: str, kind: str, passed: bool, measured: float) -> dict:
    return {"id": id, "kind": kind, "text": f"{id} text", "quantity": "q", "relation": "<",
            "threshold": 1.0, "expected": "< 1", "measured": measured, "passed": passed,
            "note": "", "source": "Fig. 1", "paper": f"{id} in the paper"}  # fmt: skip


def _store(root: Path, name: str, preset: str, folder: str, claims: list[dict],
           finished: str = "2026-01-01T00:10:00+00:00", status: str = "complete",
           overrides: dict | None = None) -> None:  # fmt: skip
    run = root / name / folder
    run.mkdir(parents=True)
    manifest = {"experiment": name, "preset": preset, "status": status,
                "started": "2026-01-01T00:00:00+00:00", "finished": finished,
                "overrides": overrides or {}}  # fmt: skip
    (run / "manifest.json").write_text(json.dumps(manifest))
    (run / "claims.json").write_text(json.dumps(claims))


def test_paper_run_is_preferred_and_checks_are_counted_not_listed(tmp_path: Path) -> None:
    _store(tmp_path, "toy-collapse", "quick", "a", [_claim("f1", "finding", False, 3.0)])
    _store(tmp_path, "toy-collapse", "paper", "b",
           [_claim("f1", "finding", True, 0.5), _claim("c1", "check", True, 0.0)])  # fmt: skip
    table = reproduction_table(tmp_path)
    row = table[table["experiment"] == "toy-collapse"].iloc[0]
    assert (row["finding"], row["preset"], row["result"]) == ("f1", "paper", "PASS")
    assert row["measured"] == "0.5" and row["checks"] == "1/1" and row["seconds"] == 600.0
    assert "c1" not in set(table["finding"])
    assert len(table) == len(experiment_names())  # one finding here, one 'not run' row per other


def test_preset_filter_and_incomplete_runs(tmp_path: Path) -> None:
    _store(tmp_path, "toy-collapse", "quick", "a", [_claim("f1", "finding", False, 3.0)])
    _store(tmp_path, "toy-collapse", "paper", "b", [_claim("f1", "finding", True, 0.5)],
           status="running")  # fmt: skip
    table = reproduction_table(tmp_path, preset="quick")
    row = table[table["experiment"] == "toy-collapse"].iloc[0]
    assert (row["preset"], row["result"]) == ("quick", "FAIL")
    assert (table[table["experiment"] != "toy-collapse"]["result"] == "not run").all()


def test_a_row_names_the_overrides_its_run_was_made_with(tmp_path: Path) -> None:
    """What a reader types to make the run again: the preset and each --set, nested keys
    dotted, in the table and in its Markdown."""
    overrides = {"seeds": [0, 1, 2], "toy": {"n_samples": 4000}, "text": "kjv.txt"}
    _store(tmp_path, "toy-collapse", "paper", "a", [_claim("f1", "finding", True, 0.5)],
           overrides=overrides)  # fmt: skip
    table = reproduction_table(tmp_path)
    row = table[table["experiment"] == "toy-collapse"].iloc[0]
    assert row["preset"] == "paper --set seeds=[0, 1, 2] toy.n_samples=4000 text=kjv.txt"


def test_missing_results_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        reproduction_table(tmp_path / "nowhere")


def test_cli_writes_markdown_and_html(tmp_path: Path) -> None:
    _store(tmp_path, "toy-collapse", "quick", "a", [_claim("f1", "finding", True, 0.25)])
    assert main(["reproduce", "--results", str(tmp_path)]) == 0
    markdown = (tmp_path / "reproduction.md").read_text()
    assert (
        "| toy-collapse | f1 | f1 in the paper (Fig. 1) | 0.25 (expected < 1) | quick | PASS |"
        in markdown
    )
    assert "Paper findings: 1 pass, 0 fail, 0 not tested" in markdown
    assert "<table" in (tmp_path / "reproduction.html").read_text()


def test_a_folder_that_holds_no_run_is_refused_and_nothing_is_written(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("no run here")  # e.g. `reproduce --results ~`
    assert main(["reproduce", "--results", str(tmp_path)]) == 2
    assert f"no complete run of any experiment is stored in '{tmp_path}'/EXPERIMENT/PRESET" in (
        capsys.readouterr().err
    )
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_not_tested_and_beyond_are_counted_apart_and_old_claims_still_read(tmp_path: Path) -> None:
    untested = _claim("f2", "finding", False, 0.9) | {
        "verdict": "NOT TESTED",
        "untested": "not learned: the rank-1 arm sits at its baseline",
    }
    beyond = _claim("b1", "beyond", True, 0.5) | {"verdict": "PASS", "untested": ""}
    old = _claim("f1", "finding", False, 3.0)  # written before verdicts: `passed` only
    _store(tmp_path, "toy-collapse", "quick", "a", [old, untested, beyond])
    table = reproduction_table(tmp_path)
    rows = table[table["experiment"] == "toy-collapse"].set_index("finding")
    assert rows.loc["f1", "result"] == "FAIL" and rows.loc["f2", "result"] == "NOT TESTED"
    assert rows.loc["f2", "why"].startswith("not learned")
    assert rows.loc["b1", "kind"] == "beyond"
    assert main(["reproduce", "--results", str(tmp_path)]) == 0
    markdown = (tmp_path / "reproduction.md").read_text()
    assert "Paper findings: 0 pass, 1 fail, 1 not tested. Beyond the papers: 1 pass" in markdown
    paper_part, beyond_part = markdown.split("## Beyond the papers")
    assert "| b1 |" in beyond_part.split("## The runs")[0] and "| b1 |" not in paper_part
    assert "NOT TESTED: not learned: the rank-1 arm sits at its baseline" in paper_part


def test_a_run_that_reused_its_units_shows_their_summed_time(tmp_path: Path) -> None:
    from rankcollapse.report.reproduction import reproduction_markdown

    _store(tmp_path, "toy-collapse", "quick", "a", [_claim("f1", "finding", True, 0.25)],
           finished="2026-01-01T00:00:01+00:00")  # fmt: skip
    manifest = json.loads((tmp_path / "toy-collapse" / "a" / "manifest.json").read_text())
    manifest["unit_seconds"] = 127.4  # every unit reused: 1 s of wall time
    (tmp_path / "toy-collapse" / "a" / "manifest.json").write_text(json.dumps(manifest))
    table = reproduction_table(tmp_path)
    row = table[table["experiment"] == "toy-collapse"].iloc[0]
    assert (row["seconds"], row["unit_seconds"]) == (1.0, 127.4)
    assert (
        "| toy-collapse | quick | 127 | 1 | paper findings: 1 of 1 pass |"
        in reproduction_markdown(table)
    )


def test_the_why_column_keeps_a_reading_width(tmp_path: Path) -> None:
    from rankcollapse.report.reproduction import reproduction_html

    claim = {**_claim("f1", "finding", False, 3.0), "note": "the margin is inside the spread"}
    _store(tmp_path, "toy-collapse", "quick", "a", [claim])
    page = reproduction_html(reproduction_table(tmp_path))
    assert '<td class="col-why">the margin is inside the spread</td>' in page
    assert int(re.search(r"td\.col-why \{ min-width: (\d+)em", page).group(1)) >= 16
    assert "body { max-width: 110em; }" in page
