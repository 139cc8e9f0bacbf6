"""wu2024-counterexample on a tiny ring (after a CSV round trip), and the basin computation on
hand-made ends."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pandas as pd
import pytest

from rankcollapse.errors import ConfigError
from rankcollapse.experiments import get_experiment
from rankcollapse.experiments.wu2024_counterexample import basin_table, summarize, units

sys.path.insert(0, str(Path(__file__).parent / "cases"))
from wu2024_counterexample import ends

EXP = get_experiment("wu2024-counterexample")
TINY = {"w": [2.0], "token1_angles": [90.0, 45.0], "n_angles": 72, "n_layers": 300, "n_drawn": 4}


@pytest.fixture(scope="module")
def summary():
    config = EXP.make_config("quick", TINY)
    results = pd.concat([EXP.run_unit(config, u) for u in units(config)], ignore_index=True)
    stored = pd.read_csv(io.StringIO(results.to_csv(index=False)), low_memory=False)
    return summarize(config, stored)


def test_basin_endpoints_and_contiguity_from_hand_made_ends():
    row = basin_table(ends([135.0, 180.0, 225.0])).iloc[0]
    assert (row["basin_first"], row["basin_last"], row["resolution"]) == (135.0, 225.0, 45.0)
    assert row["arc_start"] == pytest.approx(120.0) and row["contiguous"]
    assert not basin_table(ends([135.0, 225.0])).iloc[0]["contiguous"]


@pytest.mark.parametrize("claim", ["basin-arc", "no-ln-collapses"])
def test_the_paper_statements_hold_on_a_tiny_ring(summary, claim):
    found = {c.id: c for c in summary.claims}
    assert found[claim].passed, found[claim]


def test_figures_are_built(summary):
    assert set(summary.figures) == {"basin", "mu_rel", "trajectories"}


def test_w_at_most_one_is_a_config_error():
    with pytest.raises(ConfigError, match="w"):
        EXP.make_config("quick", {"w": [1.0]})


@pytest.mark.parametrize(
    ("claim", "table"),
    [
        ("basin-arc", ends([135.0, 225.0])),  # not one contiguous arc
        ("ln-plays-a-role", ends([180.0, 225.0])),  # LN brings only 2 of 8 starts to B
        ("no-ln-collapses", ends([135.0, 180.0, 225.0], no_ln_mu_rel=1e-3)),
    ],
)
def test_each_check_fails_on_a_broken_construction(claim, table):
    config = EXP.make_config("quick", {"w": [2.0], "token1_angles": [90.0], "n_angles": 8})
    found = {c.id: c for c in EXP.claims(config, table)}
    assert found[claim].kind == "check" and found[claim].verdict == "FAIL", found[claim]
    assert {c.id: c for c in EXP.claims(config, ends([135.0, 180.0, 225.0]))}[claim].passed
