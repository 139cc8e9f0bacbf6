"""wu2024-equilibria on a tiny config: Theorem 3 checks and the 2-D basin, through the runner's
contract (units -> run_unit -> summarize), after a CSV round trip like the stored results."""

from __future__ import annotations

import io

import pandas as pd
import pytest

from rankcollapse.errors import ConfigError
from rankcollapse.experiments import get_experiment
from rankcollapse.experiments.wu2024_equilibria import run_unit, summarize, units

EXP = get_experiment("wu2024-equilibria")
TINY = {
    "sizes": [3, 4],
    "n_layers": 60,
    "n_random": 16,
    "counterexample_w": [2.0],
    "token1_angles": [90.0, 45.0],
    "n_angles": 72,
    "counterexample_layers": 300,
    "n_drawn": 4,
}


@pytest.fixture(scope="module")
def summary():
    config = EXP.make_config("quick", TINY)
    results = pd.concat([run_unit(config, u) for u in units(config)], ignore_index=True)
    stored = pd.read_csv(io.StringIO(results.to_csv(index=False)), low_memory=False)
    return summarize(config, stored)


def test_units_are_one_per_size_and_per_w():
    config = EXP.make_config("quick", TINY)
    assert units(config) == [
        {"part": "theorem3", "n_tokens": 3},
        {"part": "theorem3", "n_tokens": 4},
        {"part": "counterexample", "w": 2.0},
    ]


@pytest.mark.parametrize(
    "claim", ["thm3-fixed-points", "thm3-ranks", "thm3-stable-rank", "ce-basin-arc",
              "ce-no-ln-collapses"],
)  # fmt: skip
def test_exact_claims_pass_on_a_tiny_run(summary, claim):
    found = {c.id: c for c in summary.claims}
    assert found[claim].passed, found[claim]


def test_every_equilibrium_count_is_two_to_the_rank(summary):
    table = summary.tables["theorem3_equilibria"]
    assert (table["equilibria"] == 2 ** table["rank"]).all()
    assert (table["rank_min"] == table["rank"]).all() and (table["rank_max"] == table["rank"]).all()


def test_figures_are_built(summary):
    assert set(summary.figures) == {
        "theorem3_stability", "counterexample_basin", "counterexample_mu",
        "counterexample_trajectories",
    }  # fmt: skip


def test_sizes_below_two_and_w_at_most_one_are_config_errors():
    with pytest.raises(ConfigError, match="sizes"):
        EXP.make_config("quick", {"sizes": [1, 3]})
    with pytest.raises(ConfigError, match="counterexample_w"):
        EXP.make_config("quick", {"counterexample_w": [1.0]})
