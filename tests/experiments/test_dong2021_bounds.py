import pytest

from rankcollapse.experiments import get_experiment
from rankcollapse.experiments.dong2021_bounds import summarize

EXP = get_experiment("dong2021-bounds")
TINY = {"depth": 4, "n_heads": 2, "d_model": 8, "n_tokens": 6, "n_samples": 2, "seeds": [0]}


@pytest.fixture(scope="module")
def tiny(run_quick):
    return run_quick(EXP.name, TINY)


def test_bounded_variants_carry_bounds_and_the_others_do_not(tiny):
    _, results = tiny
    with_bounds = set(results.loc[results["metric"] == "log10_one_step", "variant"])
    assert with_bounds == {"san-1head", "san", "san+mlp"}
    assert list(results.columns) == [
        "variant",
        "seed",
        "spread",
        "layer",
        "sample",
        "metric",
        "value",
        "at_floor",
    ]


def test_claims_hold_on_a_tiny_run(tiny):
    config, results = tiny
    claims = {c.id: c for c in summarize(config, results).claims}
    assert claims["cubic-contraction"].passed, claims["cubic-contraction"].note
    assert claims["bound-holds"].passed, claims["bound-holds"].note
    assert claims["skip-keeps-residual"].measured == 0.0
