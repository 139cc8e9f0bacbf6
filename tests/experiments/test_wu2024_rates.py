"""wu2024-rates: the bound's computation on hand-made curves and one tiny run."""

import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rankcollapse.experiments import get_experiment
from rankcollapse.experiments.wu2024_rates import claims, curve_table, summarize
from rankcollapse.theory import rate_persistence

sys.path.insert(0, str(Path(__file__).parent / "cases"))
from wu2024_rates import LN, OVERRIDES, table, with_ln

EXP = get_experiment("wu2024-rates")
TINY = {"n_layers": 12, "d_model": 8, "n_tokens": 6, "n_samples": 2, "seeds": [0]}


@pytest.fixture(scope="module")
def tiny(run_quick):
    return run_quick(EXP.name, TINY)


def test_the_bound_has_its_constant_computed_and_is_tested_from_layer_one():
    config = EXP.make_config("quick", OVERRIDES)
    rows = curve_table(config, table(complete=0.25, local=0.5)).set_index("mask")
    # complete: r = 1, mu = 0.25^t against sqrt(N - 1) 0.5^t mu(X^0), N = 4: nothing fitted,
    # so layer 1 (0.25 against 0.87) is the closest
    assert rows.loc["complete", "excess"] == pytest.approx(math.log(0.5 / math.sqrt(3)))
    assert rows.loc["complete", "bound_slope"] == pytest.approx(math.log(0.5))
    assert rows.loc["complete", "bound_decades"] == pytest.approx(
        -math.log10(math.sqrt(3) * 0.5**6)
    )
    # causal window: r = 3 at 4 tokens, one factor 1 - 0.5^3 per complete block of 3 layers
    assert rows.loc["causal_window:1", "radius"] == 3
    assert rows.loc["causal_window:1", "bound_slope"] == pytest.approx(2 * math.log(0.875) / 6)


def test_a_late_small_eps_loosens_the_bound_as_the_theorem_says():
    config = EXP.make_config("quick", OVERRIDES)
    curves = table(complete=0.5, local=0.5)
    late = (curves["metric"] == "eps") & (curves["layer"] == 6)
    # one weight of 0.1 at layer 6: the theorem's eps for layer 6 is 0.1, so B_6 = sqrt(3) 0.9^6
    rows = curve_table(config, curves.assign(value=curves["value"].where(~late, 0.1)))
    complete = rows.set_index("mask").loc["complete"]
    assert complete["bound_slope"] == pytest.approx(math.log(0.9))  # (log B_6 - log B_0) / 6
    assert complete["excess"] == pytest.approx(
        -math.log(math.sqrt(3))
    )  # layers 1-5: B = sqrt(3) mu


def test_amplifying_value_maps_leave_the_bound_not_tested():
    config = EXP.make_config("quick", OVERRIDES)
    # value-map products doubling per layer: A3 (bounded products of W_V) does not hold
    found = {c.id: c for c in claims(config, table(complete=0.25, local=0.5, value_gain=2.0))}
    bound = found["bound-is-upper"]
    assert bound.verdict == "NOT TESTED" and bound.untested.startswith("assumptions not met")
    assert "A3 not met" in bound.note


def test_local_masks_slower_is_the_per_sample_gap_of_the_two_slopes():
    config = EXP.make_config("quick", OVERRIDES)
    found = {c.id: c for c in claims(config, table(complete=0.25, local=0.5))}
    assert found["local-masks-slower"].measured == pytest.approx(math.log(2))
    assert found["local-masks-slower"].n_units == 2  # one seed x two samples
    one = table(complete=0.25, local=0.5).query("sample != 1")  # one sample: no spread
    claim = {c.id: c for c in claims(config, one)}["local-masks-slower"]
    assert claim.verdict == "NOT TESTED" and "the paper preset" in claim.untested


def test_rows_hold_eps_of_every_layer_and_the_graph_facts(tiny):
    config, results = tiny
    eps = results[results["metric"] == "eps"]
    assert sorted(eps["layer"].unique()) == list(range(1, 13)) and (eps["value"] > 0).all()
    table_ = curve_table(config, results).set_index(["mask", "norm"])
    assert table_.loc[("causal_window:1", "none"), "radius"] == 5  # ceil((6 - 1) / 1)


def test_the_value_maps_products_are_recorded_and_orthogonal(tiny):
    _, results = tiny
    norms = results[results["metric"] == "value_norm"]
    assert sorted(norms["layer"].unique()) == list(range(13))
    assert norms["value"].to_numpy() == pytest.approx(1.0)  # products of orthogonal maps


def test_measured_collapse_stays_under_the_bound_on_a_tiny_run(tiny):
    config, results = tiny
    found = {c.id: c for c in summarize(config, results).claims}
    # 12 layers: no mask's bound reaches a decade below mu(X^0), so the run cannot decide
    bound = found["bound-is-upper"]
    assert bound.verdict == "NOT TESTED" and bound.untested.startswith("preset too small")
    # with the unit norm and orthogonal W_V every mask's mu_rel falls (Thm 2, Cor 1)
    collapse = found["ln-collapses-every-mask"]
    assert collapse.kind == "finding" and collapse.measured > 0, collapse.note
    assert found["local-masks-slower"].passed, found["local-masks-slower"].note


def test_the_causal_mask_stays_under_the_computed_bound_on_a_real_run(run_quick):
    # 4 tokens at near-uniform attention: eps about 0.25, so the bound sqrt(3) 0.75^t falls
    # 1.7 decades below mu(X^0) in 16 layers, and the measured mu (about 0.5^t) stays under it
    sizes = {"n_layers": 16, "d_model": 8, "n_tokens": 4, "n_samples": 2, "seeds": [0]}
    config, results = run_quick(EXP.name, {**sizes, "masks": ["causal"], "norms": ["none"]})
    bound = {c.id: c for c in claims(config, results)}["bound-is-upper"]
    assert bound.verdict == "PASS", bound.note
    assert bound.measured < -0.5


def test_bound_is_upper_is_a_check_that_still_fails_when_mu_tops_the_bound():
    config = EXP.make_config("quick", OVERRIDES)
    under = {c.id: c for c in claims(config, table(complete=0.25, local=0.5))}["bound-is-upper"]
    assert under.kind == "check" and under.verdict == "PASS"
    # mu shrinking 0.9 per layer against the bound's 0.5: a layer that is not X A W_V alone
    over = {c.id: c for c in claims(config, table(complete=0.9, local=0.5))}["bound-is-upper"]
    assert over.kind == "check" and over.verdict == "FAIL"


def test_ln_collapse_is_decided_by_the_fall_persisting_not_by_its_size():
    config = EXP.make_config("quick", LN)
    # 0.98 per layer: 0.1 decades over 12 layers, yet exponential (each quarter as fast)
    slow = {c.id: c for c in claims(config, with_ln(complete=0.25, local=0.98))}
    assert slow["ln-collapses-every-mask"].verdict == "PASS"
    assert slow["ln-collapses-every-mask"].measured == pytest.approx(1.0)
    # a fall that stops: 0.5 + 0.5 x 0.25^t loses 0.3 decades, then levels off
    stops = {c.id: c for c in claims(config, with_ln(complete=0.25, local=0.25, plateau=0.5))}
    assert stops["ln-collapses-every-mask"].verdict == "FAIL"
    assert stops["ln-collapses-every-mask"].measured < 0.05


def test_rate_persistence_of_a_curve_reaching_the_floor_and_of_a_rising_one():
    layers = np.arange(9)
    floor = pd.DataFrame({"layer": layers, "sample": 0, "value": 10.0 ** -(2.0 * layers),
                          "at_floor": layers >= 8})  # fmt: skip
    assert rate_persistence(floor) == (math.inf, 8, pytest.approx(16.0))
    rising = floor.assign(value=10.0 ** (0.1 * layers), at_floor=False)
    assert rate_persistence(rising)[0] == 0.0


def test_unit_norm_runs_start_from_non_negative_cosines(tiny):
    config, results = tiny
    rows = results[(results["norm"] == "unit") & (results["metric"] == "mu_rel")]
    assert not rows.empty and (rows["layer"] == config.n_layers).any()
    drops = {c.id: c for c in claims(config, results)}["ln-collapses-every-mask"].note
    assert "inputs |Z|" in drops
