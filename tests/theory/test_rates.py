"""Per-layer statistics of measured curves (rankcollapse.theory.rates)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from rankcollapse.theory import contraction_factors, first_layer_below, layer_stats


def test_layer_stats_geometric_mean_matches_hand_value():
    res = pd.DataFrame(
        {"variant": "san", "layer": [0, 0], "value": [0.1, 0.001], "at_floor": [False, True]}
    )
    row = layer_stats(res, ("variant",)).iloc[0]
    assert row["geo_mean"] == pytest.approx(0.01) and row["mean"] == pytest.approx(0.0505)
    assert row["any_at_floor"]


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
