import pytest

from rankcollapse.experiments import get_experiment
from rankcollapse.experiments.wu2024_rates import rate_table, summarize

EXP = get_experiment("wu2024-rates")
TINY = {"depth": 12, "d_model": 8, "n_tokens": 6, "n_samples": 2, "seeds": [0]}


@pytest.fixture(scope="module")
def tiny(run_quick):
    return run_quick(EXP.name, TINY)


def test_rate_table_has_graph_facts_of_each_mask(tiny):
    _, results = tiny
    table = rate_table(results).set_index(["mask", "norm"])
    assert table.loc[("causal_window:1", "none"), "radius"] == 5  # ceil((6 - 1) / 1)
    assert table.loc[("causal", "none"), "n_centers"] == 1
    assert table.loc[("complete", "none"), "n_centers"] == 6
    assert (table["eps"] > 0).all()


def test_measured_rates_are_at_least_as_steep_as_the_bound(tiny):
    config, results = tiny
    claims = {c.id: c for c in summarize(config, results).claims}
    assert claims["bound-is-upper"].passed, claims["bound-is-upper"].note
    assert claims["local-masks-slower"].passed, claims["local-masks-slower"].note
