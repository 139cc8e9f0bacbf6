"""`rankcollapse run`, `list` and `report` on the command line (with a private registry)."""

from __future__ import annotations

import dataclasses

import pytest
from tiny_experiment import TINY

from rankcollapse import cli
from rankcollapse.experiments import _registry


@pytest.fixture(autouse=True)
def only_tiny(monkeypatch):
    monkeypatch.setattr(_registry, "_REGISTRY", {"tiny": TINY})


def test_list_shows_name_description_and_presets_from_the_catalogue(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert "toy-collapse" in out and "Toy SAN at init: pure attention collapses" in out
    assert "quick, paper" in out


def test_run_prints_the_claims_table_and_the_report_path(tmp_path, capsys):
    out_dir = tmp_path / "run"
    argv = ["run", "tiny", "--set", "items=1", f"log_dir={tmp_path}", "--out", str(out_dir)]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert (
        "PASS" in out
        and "FAIL" in out
        and "paper findings: 1 of 2 pass, 1 fail (failed: impossible)" in out
    )
    assert f"report: {out_dir / 'report.html'}" in out
    assert (out_dir / "report.html").is_file()


def test_a_config_typo_fails_before_any_unit_with_the_key_named(tmp_path, capsys):
    argv = ["run", "tiny", "--set", "itmes=1", f"log_dir={tmp_path}", "--out", str(tmp_path / "r")]
    assert cli.main(argv) == 2
    out = capsys.readouterr().err
    assert "tiny has no config key 'itmes'. Did you mean 'items'?" in out
    assert not (tmp_path / "calls.log").exists() and not (tmp_path / "r").exists()


def test_run_all_runs_every_experiment_under_the_results_root(tmp_path, capsys):
    argv = ["run", "all", "--set", "items=1", f"log_dir={tmp_path}", "--out", str(tmp_path / "res")]
    assert cli.main(argv) == 0
    (run_dir,) = (tmp_path / "res" / "tiny").iterdir()
    assert (run_dir / "report.html").is_file() and len(run_dir.name) == 10


def test_unknown_experiment_lists_the_known_ones_and_suggests(capsys):
    assert cli.main(["run", "tinyy"]) == 2
    assert (
        "unknown experiment 'tinyy'. Known: tiny. Did you mean 'tiny'?" in capsys.readouterr().err
    )


def test_run_with_no_figures_writes_results_claims_and_report_without_drawing(tmp_path, capsys):
    out_dir = tmp_path / "run"
    argv = ["run", "tiny", "--set", "items=1", f"log_dir={tmp_path}", "--out", str(out_dir)]
    assert cli.main([*argv, "--no-figures"]) == 0
    assert "paper findings: 1 of 2 pass, 1 fail (failed: impossible)" in capsys.readouterr().out
    assert not (out_dir / "figures").exists()
    assert "<img" not in (out_dir / "report.html").read_text()
    assert {"results.csv", "claims.json", "report.html"} <= {p.name for p in out_dir.iterdir()}
    assert cli.main(argv) == 0  # the same run again draws them
    assert any((out_dir / "figures").glob("*.svg"))


def test_run_all_with_the_cpu_preset_runs_only_the_experiments_that_have_it(
    tmp_path, capsys, monkeypatch
):
    argv = ["run", "all", "--preset", "cpu", "--set", "items=1", f"log_dir={tmp_path}"]
    assert cli.main([*argv, "--out", str(tmp_path / "none")]) == 2
    assert "no experiment has the preset 'cpu'" in capsys.readouterr().err
    with_cpu = dataclasses.replace(TINY, name="tiny-cpu", presets={**TINY.presets, "cpu": {}})
    monkeypatch.setattr(_registry, "_REGISTRY", {"tiny": TINY, "tiny-cpu": with_cpu})
    assert cli.main([*argv, "--out", str(tmp_path / "res")]) == 0
    assert [p.name for p in (tmp_path / "res").iterdir() if p.is_dir()] == ["tiny-cpu"]
