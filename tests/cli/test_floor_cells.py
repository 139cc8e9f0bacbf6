"""Printed tables agree with the figures: a cell with some samples at the dtype floor shows the
mean of the others and the share at the floor, never a mean that mixes in rounding noise."""

from __future__ import annotations

import pandas as pd
from rich.console import Console

from rankcollapse.cli import _common, _console, main
from rankcollapse.cli._common import summary_cells
from rankcollapse.metrics import floor_cell as cell


def _layer(layer: int, values: list[float], floors: list[bool], metric: str = "min_sv_rel"):
    return pd.DataFrame({"variant": "san", "layer": layer, "sample": range(len(values)),
                         "metric": metric, "value": values, "at_floor": floors})  # fmt: skip


def test_a_partly_floored_cell_shows_the_mean_above_the_floor_and_the_share():
    # probe minilm, san, layer 2: 28 of 32 samples at the float32 floor, 4 at 3e-6
    df = _layer(2, [3e-6] * 4 + [1e-9] * 28, [False] * 4 + [True] * 28)
    rows, columns = summary_cells(df, ["layer"], "metric")
    assert rows == [(2,)] and columns == {"min_sv_rel": ["3e-06 (28/32 <floor)"]}


def test_cells_for_none_all_and_no_value():
    assert cell(0.123456, 0, 4) == "0.123"
    assert cell(float("nan"), 4, 4) == "<floor"
    assert cell(float("nan"), 0, 4) == "-"
    assert cell(float("nan"), 0, 0) == "-"


def test_the_layer_table_prints_each_kind_of_cell(monkeypatch, capsys):
    monkeypatch.setattr(_console, "console", Console(width=120, force_terminal=False))
    df = pd.concat([_layer(0, [0.5, 0.7], [False, False]), _layer(1, [0.2, 1e-9], [False, True]),
                    _layer(2, [1e-9, 1e-9], [True, True]),
                    _layer(0, [float("nan")] * 2, [False] * 2, "attn_rank")])  # fmt: skip
    _common.print_layer_means(df, "t", keys=("variant", "layer"))
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("┃"))
    assert [c.strip() for c in header.split("┃")[1:-1]] == ["layer", "min_sv_rel", "attn_rank"]
    rows = [[c.strip() for c in line.split("│")[1:-1]]
            for line in out.splitlines() if line.startswith("│")]  # fmt: skip
    assert rows == [["0", "0.6", "-"], ["1", "0.2 (1/2 <floor)", "-"], ["2", "<floor", "-"]]


def test_compare_prints_the_share_at_the_floor(tmp_path, capsys):
    sim = tmp_path / "sim"
    assert main(["simulate", "--n-layers", "6", "--n-samples", "3", "--n-tokens", "4",
                 "--metrics", "min_sv", "--seed", "3", "--out", str(sim)]) == 0  # fmt: skip
    results = pd.read_csv(sim / "results.csv")
    capsys.readouterr()
    assert main(["compare", str(sim), "--metrics", "min_sv", "--out", str(tmp_path / "c")]) == 0
    out = capsys.readouterr().out
    for _, rows in results.groupby("layer"):
        k, n = int(rows["at_floor"].sum()), len(rows)
        if 0 < k < n:
            mean = rows.loc[~rows["at_floor"], "value"].mean()
            assert f"{mean:.3g} ({k}/{n} <floor)" in out
