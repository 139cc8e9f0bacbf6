"""measure.toy_curves: toy curves share their inputs; theory.curve_slopes: slopes per curve."""

import math

import numpy as np
import pandas as pd
import pytest

from rankcollapse.masks import parse_mask_spec
from rankcollapse.measure import toy_curves
from rankcollapse.theory import curve_slopes
from rankcollapse.variants import VARIANTS

SIZES = {"n_layers": 3, "d_model": 8, "n_tokens": 6, "n_samples": 2, "seed": 0}


def test_every_variant_starts_from_the_same_tokens_and_pure_san_collapses():
    frame = toy_curves(
        [VARIANTS["wu:san"], VARIANTS["wu:san+skip+ln"]], parse_mask_spec("causal"), **SIZES
    )
    layer0 = frame[(frame["layer"] == 0) & (frame["metric"] == "mu")]
    assert layer0.groupby("sample")["value"].nunique().eq(1).all()
    san = frame[(frame["variant"] == "san") & (frame["metric"] == "mu_rel")]
    by_layer = san.groupby("layer")["value"].mean()
    assert by_layer.iloc[-1] < by_layer.iloc[0]
    assert set(frame["mode"]) == {"eval"} and set(frame["model"]) == {"toy"}


def test_the_weights_seed_and_the_data_seed_are_different_streams():
    complete = parse_mask_spec("complete")
    a = toy_curves([VARIANTS["wu:san"]], complete, **SIZES)
    b = toy_curves([VARIANTS["wu:san"]], complete, **{**SIZES, "seed": 1})
    assert not np.allclose(a["value"], b["value"])


def test_curve_slopes_fit_each_curve_and_flag_a_diverged_one():
    rows = pd.DataFrame({"v": "a", "layer": [0, 1, 2], "sample": 0, "at_floor": False,
                         "metric": "mu", "value": np.exp([0.0, -1.0, -2.0])})  # fmt: skip
    lost = pd.DataFrame([{"v": "b", "layer": np.nan, "sample": np.nan, "at_floor": False,
                          "metric": "diverged", "value": 1.0}])  # fmt: skip
    table = curve_slopes(pd.concat([rows, lost]), ["v"]).set_index("v")
    assert table.loc["a", "slope_mu"] == pytest.approx(-1.0) and not table.loc["a", "diverged"]
    assert table.loc["b", "diverged"] and math.isnan(table.loc["b", "slope_mu"])
