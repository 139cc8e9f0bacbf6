"""Per-layer statistics of measured curves (rankcollapse.theory.rates)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from rankcollapse.theory import (
    collapse_rate,
    collapse_rates,
    contraction_factors,
    curve_slopes,
    first_layer_below,
    layer_cells,
    layer_stats,
    shown_layer_stats,
)
from rankcollapse.theory.rates import sample_rates


def test_layer_stats_geometric_mean_matches_hand_value():
    res = pd.DataFrame(
        {"variant": "san", "layer": [0, 0], "value": [0.1, 0.001], "at_floor": [False, True]}
    )
    row = layer_stats(res, ("variant",)).iloc[0]
    assert row["geo_mean"] == pytest.approx(0.01) and row["mean"] == pytest.approx(0.0505)
    assert row["any_at_floor"]


def test_layer_stats_keep_the_floor_apart_and_tables_show_the_share():
    # toy-collapse quick, san at layer 4: 22 of 24 sequences at the float64 floor
    values = [5e-11, 3.16e-11] + [2e-16] * 22
    res = pd.DataFrame({"variant": "san", "layer": 4, "value": values,
                        "at_floor": [False] * 2 + [True] * 22})  # fmt: skip
    res = pd.concat([res, res.assign(layer=5, at_floor=True)], ignore_index=True)
    stats = layer_stats(res, ("variant",))
    four, five = stats.iloc[0], stats.iloc[1]
    assert (four["n_samples"], four["n_at_floor"], five["n_at_floor"]) == (24, 22, 24)
    assert four["mean_above_floor"] == pytest.approx(4.08e-11)
    assert four["geo_mean_above_floor"] == pytest.approx(math.sqrt(5e-11 * 3.16e-11))
    assert four["mean"] == pytest.approx(sum(values) / 24)  # what claims read: unchanged
    assert math.isnan(five["mean_above_floor"])
    assert layer_cells(stats).tolist() == ["4.08e-11 (22/24 <floor)", "<floor"]
    shown = shown_layer_stats(stats)
    assert list(shown.columns) == ["variant", "layer", "mean", "std", "geo_mean"]
    assert shown["geo_mean"].tolist() == ["3.97e-11 (22/24 <floor)", "<floor"]
    assert shown["std"].iloc[0] == pytest.approx(np.std([5e-11, 3.16e-11], ddof=1))
    assert math.isnan(shown["std"].iloc[1])


def test_first_layer_below_is_inf_when_no_layer_gets_there():
    table = pd.DataFrame({"model": ["a"] * 3 + ["b"] * 3, "layer": [0, 1, 2] * 2,
                          "mean": [1.0, 0.5, 0.001, 1.0, 0.5, 0.2]})  # fmt: skip
    assert first_layer_below(table, 0.01) == {"a": (2.0, 2), "b": (math.inf, 2)}


def test_contraction_factors_stop_at_the_first_floor_layer():
    curve = pd.DataFrame({"layer": [0, 1, 2, 3, 4], "geo_mean": [1.0, 0.5, 0.125, 1e-16, 1e-16],
                          "any_at_floor": [False, False, False, True, False]})  # fmt: skip
    worst, q, run = contraction_factors(curve)
    assert list(run["layer"]) == [0, 1, 2] and q.tolist() == [0.5, 0.25]
    assert worst == pytest.approx(0.5)


def test_collapse_rates_equal_collapse_rate_of_each_curve_bit_for_bit():
    """Shuffled rows, unsorted layers, a curve cut at its first floor layer, one too short."""
    rng = np.random.default_rng(0)
    rows = [
        {"model": m, "mask": k, "layer": layer, "sample": s, "value": v, "at_floor": v < 1e-12}
        for m, decay in (("a", 0.5), ("b", 0.01))
        for k in ("causal", "window:1")
        for layer in range(6)
        for s in range(3)
        for v in [decay**layer * rng.uniform(0.5, 2.0) if m == "a" else decay ** (4 * layer)]
    ] + [{"model": "c", "mask": "causal", "layer": 0, "sample": 0, "value": 1.0, "at_floor": False}]
    curves = pd.DataFrame(rows).sample(frac=1.0, random_state=1)
    table = collapse_rates(curves, ["model", "mask"])
    assert table[["model", "mask"]].values.tolist() == (
        curves[["model", "mask"]].drop_duplicates().values.tolist()
    )
    for row in table.itertuples():
        curve = curves[(curves["model"] == row.model) & (curves["mask"] == row.mask)]
        expected = collapse_rate(curve)
        assert row.n_fit == expected.n_fit
        assert row.slope == expected.slope or (math.isnan(row.slope) and math.isnan(expected.slope))
    by_model = table.set_index("model")
    assert (by_model.loc["b", "n_fit"] == 2).all()  # layer 2 of b is at the floor: 1e-16
    assert math.isnan(by_model.loc["c", "slope"])  # one layer: no slope
    assert by_model.loc["a", "slope"].between(-0.9, -0.5).all()  # log 0.5 = -0.69


def test_curve_slopes_fit_each_curve_and_flag_a_diverged_one():
    rows = pd.DataFrame({"v": "a", "layer": [0, 1, 2], "sample": 0, "at_floor": False,
                         "metric": "mu", "value": np.exp([0.0, -1.0, -2.0])})  # fmt: skip
    lost = pd.DataFrame([{"v": "b", "layer": np.nan, "sample": np.nan, "at_floor": False,
                          "metric": "diverged", "value": 1.0}])  # fmt: skip
    table = curve_slopes(pd.concat([rows, lost]), ["v"]).set_index("v")
    assert table.loc["a", "slope_mu"] == pytest.approx(-1.0) and not table.loc["a", "diverged"]
    assert table.loc["b", "diverged"] and math.isnan(table.loc["b", "slope_mu"])


def test_a_curve_without_a_column_a_rate_reads_is_named_and_no_curve_gives_no_rate():
    from rankcollapse.errors import InputError

    curve = pd.DataFrame({"layer": [0, 1], "sample": 0, "value": [1.0, 0.5]})
    with pytest.raises(InputError, match=r"no column\(s\) \['at_floor'\].*pass rows \(layer"):
        collapse_rate(curve)  # a KeyError from inside, before
    with pytest.raises(InputError, match="column 'value' holds .* values, not numbers"):
        collapse_rate(curve.assign(value=["1.0", "0.5"], at_floor=False))
    assert collapse_rate(curve.assign(at_floor=False)).slope == pytest.approx(math.log(0.5))
    none = collapse_rates(curve.assign(at_floor=False, v="a").iloc[:0], ["v"])
    assert none.empty and list(none.columns) == ["v", "slope", "n_fit"]


def _frame_functions():
    """Every public function of `rankcollapse.theory` whose first argument is a frame."""
    import inspect

    from rankcollapse import theory

    for name in theory.__all__ if hasattr(theory, "__all__") else dir(theory):
        function = getattr(theory, name)
        if name.startswith("_") or not inspect.isfunction(function):
            continue
        first = next(iter(inspect.signature(function).parameters.values()), None)
        if first is not None and "DataFrame" in str(first.annotation):
            yield name, function


# the arguments besides the frame each needs; a function missing here fails the test below
OTHER_ARGUMENTS = {
    "at_layer": ("last",),
    "collapse_rates": (["model"],),
    "curve_slopes": (["model"],),
    "early_drop": (2, 1e-15),
    "first_layer_below": (0.1,),
    "layers_above": ("mu_rel", 1.0),
}
KEYWORDS = {"layers_above": {"by": ["model"]}}


@pytest.mark.parametrize("name", [name for name, _ in _frame_functions()])
def test_every_theory_function_of_a_frame_names_the_columns_it_lacks(name):
    from rankcollapse import theory
    from rankcollapse.errors import InputError

    function = getattr(theory, name)
    given = pd.DataFrame({"step": [0, 1], "loss": [1.0, 0.5]})  # a frame of something else
    with pytest.raises(InputError, match=r"^the frame has no column\(s\) \[.*; pass "):
        function(given, *OTHER_ARGUMENTS.get(name, ()), **KEYWORDS.get(name, {}))


def test_the_groups_of_a_rate_may_be_named_by_one_column():
    curves = pd.DataFrame({"model": ["a", "a", "b", "b"], "layer": [0, 1] * 2, "sample": 0,
                           "at_floor": False, "value": [1.0, 0.5, 1.0, 0.25]})  # fmt: skip
    for function in (collapse_rates, sample_rates):  # "model" was read letter by letter
        assert function(curves, "model").equals(function(curves, ["model"]))
    assert layer_stats(curves, "model").equals(layer_stats(curves, ["model"]))
