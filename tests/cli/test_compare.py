"""`rankcollapse compare` and the figure side of `simulate`: one figure and one table of
several stored folders; a fresh folder per config; one meaning of --temperature."""

from __future__ import annotations

import pandas as pd
import pytest

from rankcollapse.cli import main


def simulate(out, *extra: str) -> None:
    argv = ["simulate", "--n-layers", "3", "--n-tokens", "8", "--n-samples", "4",
            "--metrics", "res_comp_rel,cos_mean", "--out", str(out), *extra]  # fmt: skip
    assert main(argv) == 0


def test_compare_draws_every_folder_in_one_figure_and_one_table(tmp_path, capsys):
    simulate(tmp_path / "san")
    simulate(tmp_path / "skip", "--skip", "on")
    out = tmp_path / "cmp"
    argv = ["compare", str(tmp_path / "san"), str(tmp_path / "skip"), "--metrics", "all",
            "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    shown = {p.name for p in out.iterdir() if not p.name.startswith(".")}
    assert shown == {"compare.png", "compare.svg", "compare.csv"}
    table = pd.read_csv(out / "compare.csv")
    assert list(table.columns) == ["metric", "layer", "toy network", "skip=on"]  # in words
    san = pd.read_csv(tmp_path / "san" / "results.csv")
    expected = san.query("metric == 'cos_mean' and layer == 2")["value"].mean()
    row = table.query("metric == 'cos_mean' and layer == 2")
    assert row["toy network"].item() == pytest.approx(expected, rel=1e-15)


def test_compare_names_a_folder_without_results(tmp_path, capsys):
    assert main(["compare", str(tmp_path)]) == 2
    assert "has no results.csv; pass folders written by" in capsys.readouterr().err


def test_simulate_writes_one_folder_per_config_and_says_when_it_overwrites(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    for skip in ("off", "on", "on"):
        assert main(["simulate", "--n-layers", "2", "--n-samples", "2", "--skip", skip]) == 0
    folders = sorted((tmp_path / "results" / "simulate").iterdir())
    assert len(folders) == 2
    out = capsys.readouterr().out
    assert out.count("overwriting the earlier results in") == 1
    assert all((f / "collapse.svg").is_file() for f in folders)


def test_simulate_score_scale_is_scale_dqk_and_temperature_stays_a_hidden_alias(tmp_path, capsys):
    simulate(tmp_path / "a", "--scale-dqk", "4")
    simulate(tmp_path / "b", "--temperature", "4")
    a, b = (pd.read_csv(tmp_path / d / "results.csv") for d in "ab")
    pd.testing.assert_frame_equal(a, b)
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    shown = capsys.readouterr().out
    assert "--scale-dqk" in shown and "--temperature" not in shown
    assert "default: 32)" in shown and "one per config" in shown
