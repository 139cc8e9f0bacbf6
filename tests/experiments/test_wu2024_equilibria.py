"""wu2024-equilibria on a tiny config: Theorem 3 checks through the runner's contract (units ->
run_unit -> summarize, after a CSV round trip like the stored results), and the small-basins
finding's computation on hand-made rows."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pandas as pd
import pytest

from rankcollapse.errors import ConfigError
from rankcollapse.experiments import get_experiment
from rankcollapse.experiments.wu2024_equilibria import claims, keeps_rank_2, summarize, units

sys.path.insert(0, str(Path(__file__).parent / "cases"))
from wu2024_equilibria import OVERRIDES, random_ends

EXP = get_experiment("wu2024-equilibria")
TINY = {"n_tokens": [3, 4], "n_layers": 60, "n_random": 16}


@pytest.fixture(scope="module")
def summary():
    config = EXP.make_config("quick", TINY)
    results = pd.concat([EXP.run_unit(config, u) for u in units(config)], ignore_index=True)
    stored = pd.read_csv(io.StringIO(results.to_csv(index=False)), low_memory=False)
    return summarize(config, stored)


def test_units_are_one_per_size():
    assert units(EXP.make_config("quick", TINY)) == [{"n_tokens": 3}, {"n_tokens": 4}]


@pytest.mark.parametrize("claim", ["thm3-fixed-points", "thm3-ranks", "thm3-stable-rank"])
def test_the_theorem_holds_as_checks_on_a_tiny_run(summary, claim):
    found = {c.id: c for c in summary.claims}
    assert found[claim].kind == "check" and found[claim].passed, found[claim]


def test_every_equilibrium_count_is_two_to_the_rank(summary):
    table = summary.tables["Theorem 3 equilibria"]
    assert (table["equilibria"] == 2 ** table["rank"]).all()
    assert (table["rank_min"] == table["rank"]).all() and (table["rank_max"] == table["rank"]).all()


def test_small_basins_measures_the_largest_fraction_keeping_rank_two():
    config = EXP.make_config("quick", OVERRIDES)
    rows = random_ends({3: [1, 1, 1, 2], 4: [2, 2, 3, 1]})
    assert keeps_rank_2(rows).set_index("n_tokens")["fraction"].tolist() == [0.25, 0.75]
    claim = {c.id: c for c in claims(config, rows)}["thm3-small-basins"]
    assert claim.measured == pytest.approx(0.75) and "N=4: 0.75" in claim.note


def test_small_basins_fails_when_a_size_is_missing_and_ignores_n_two():
    config = EXP.make_config("quick", {"n_tokens": [2, 3, 4]})
    claim = {c.id: c for c in claims(config, random_ends({2: [2, 2], 3: [1, 1]}))}
    assert not claim["thm3-small-basins"].passed
    assert "N=4: missing" in claim["thm3-small-basins"].note
    assert "N=2" not in claim["thm3-small-basins"].note


def test_sizes_below_two_are_config_errors():
    with pytest.raises(ConfigError, match="n_tokens"):
        EXP.make_config("quick", {"n_tokens": [1, 3]})
