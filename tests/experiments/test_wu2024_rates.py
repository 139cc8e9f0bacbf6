import pandas as pd
import pytest
import torch

from rankcollapse.experiments import get_experiment
from rankcollapse.experiments.wu2024_rates import rate_table, run_unit, summarize, units

EXP = get_experiment("wu2024-rates")
TINY = {"depth": 12, "d_model": 8, "n_tokens": 6, "n_samples": 2, "seeds": [0]}


@pytest.fixture(scope="module")
def tiny():
    config = EXP.make_config("quick", TINY)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        results = pd.concat([run_unit(config, u) for u in units(config)], ignore_index=True)
    finally:
        torch.set_num_threads(threads)
    return config, results


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
