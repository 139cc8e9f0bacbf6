import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from rankcollapse.errors import ConfigError
from rankcollapse.experiments import get_experiment
from rankcollapse.experiments.paths_by_length import (
    claims,
    rank1_ratios,
    run_unit,
    summarize,
    units,
)
from rankcollapse.plot import products_figure

EXP = get_experiment("paths-by-length")
TINY = {
    "n_layers": 3,
    "n_heads": 2,
    "d_model": 8,
    "n_tokens": 5,
    "n_samples": 2,
    "n_paths": 3,
    "models": [],
}


def _run(config):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return pd.concat([run_unit(config, u) for u in units(config)], ignore_index=True)
    finally:
        torch.set_num_threads(threads)


def test_toy_units_are_exact_and_pure_san_lives_at_length_l():
    config = EXP.make_config("quick", TINY)
    results = _run(config)
    claims = {c.id: c for c in summarize(config, results).claims}
    assert (
        claims["toy-decomposition-exact"].passed
        and claims["toy-decomposition-exact"].kind == "check"
    )
    assert (
        claims["pure-san-single-length"].passed and claims["pure-san-single-length"].kind == "check"
    )
    assert claims["long-products-near-rank-one"].kind == "check"
    assert set(results["model"]) == {
        "toy-san",
        "toy-san+skip",
        "toy-san+skip+ln",
        "toy-transformer",
    }
    assert "real-decomposition-exact" not in claims
    shares = results[results["metric"] == "share"].groupby(["model", "sample"])["value"].sum()
    assert shares.to_numpy() == pytest.approx(1.0, abs=1e-12)


def test_real_model_names_become_units_with_their_init():
    config = EXP.make_config("quick", {"models": ["minilm:random", "smollm2"]})
    reals = [u for u in units(config) if not u["model"].startswith("toy-")]
    assert reals == [
        {"model": "minilm", "init": "random", "seed": 0},
        {"model": "smollm2", "init": "pretrained", "seed": 0},
    ]


@pytest.mark.slow
def test_pretrained_minilm_decomposes_exactly():
    config = EXP.make_config("quick", {**TINY, "toy_variants": [], "models": ["minilm:pretrained"]})
    results = _run(config)
    error = results.loc[results["metric"] == "exact_error", "value"]
    assert error.max() < 1e-12


def test_a_name_that_is_no_model_is_refused_before_any_work():
    with pytest.raises(ConfigError, match="'gpt3' cannot be decomposed.*minilm"):
        EXP.make_config("quick", {"models": ["gpt3:random"]})
    with pytest.raises(ConfigError, match="must be pretrained or random"):
        EXP.make_config("quick", {"models": ["minilm:trained"]})


def test_rank1_ratio_is_the_median_at_length_l_over_length_1():
    sys.path.insert(0, str(Path(__file__).parent / "cases"))
    from paths_by_length import table

    ratios = rank1_ratios(table())
    assert ratios["minilm (pretrained)"] == pytest.approx(0.01 / 0.5)
    assert ratios["toy-san (random)"] == pytest.approx(1e-3 / 0.4)


def test_a_model_without_products_fails_the_check():
    sys.path.insert(0, str(Path(__file__).parent / "cases"))
    from paths_by_length import OVERRIDES, table

    config = EXP.make_config("quick", {**OVERRIDES, "models": ["minilm:pretrained", "smollm2"]})
    claim = {c.id: c for c in claims(config, table())}["long-products-near-rank-one"]
    assert not claim.passed and "smollm2 (pretrained): nan" in claim.note


def test_products_figure_wraps_into_rows_of_three():
    products = pd.DataFrame(
        {"model": [f"m{i}" for i in range(4) for _ in range(2)], "length": [1, 2] * 4,
         "value": [0.5, 0.1] * 4}
    )  # fmt: skip
    figure = products_figure(products)
    assert len([ax for ax in figure.axes if ax.get_visible()]) == 4
    assert figure.axes[0].get_subplotspec().get_gridspec().nrows == 2  # rows of three
