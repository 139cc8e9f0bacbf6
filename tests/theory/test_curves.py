"""theory.curves: toy curves share their inputs, slopes per curve, and the config boundary."""

import math

import numpy as np
import pandas as pd
import pytest
import torch
from pydantic import ValidationError

from rankcollapse.theory.curves import (
    CurvesConfig,
    curve_slopes,
    load_real,
    toy_curves,
)

SIZES = {"n_layers": 3, "d_model": 8, "n_tokens": 6, "n_samples": 2, "seed": 0}


def test_every_variant_starts_from_the_same_tokens_and_pure_san_collapses():
    frame = toy_curves(["san", "san+skip+ln"], "causal", **SIZES)
    layer0 = frame[(frame["layer"] == 0) & (frame["metric"] == "mu")]
    assert layer0.groupby("sample")["value"].nunique().eq(1).all()
    san = frame[(frame["variant"] == "san") & (frame["metric"] == "mu_rel")]
    by_layer = san.groupby("layer")["value"].mean()
    assert by_layer.iloc[-1] < by_layer.iloc[0]
    assert set(frame["mode"]) == {"eval"} and set(frame["model"]) == {"toy"}


def test_the_weights_seed_and_the_data_seed_are_different_streams():
    a = toy_curves(["san"], "complete", **SIZES)
    b = toy_curves(["san"], "complete", **{**SIZES, "seed": 1})
    assert not np.allclose(a["value"], b["value"])


def test_curve_slopes_fit_each_curve_and_flag_a_diverged_one():
    rows = pd.DataFrame({"v": "a", "layer": [0, 1, 2], "sample": 0, "at_floor": False,
                         "metric": "mu", "value": np.exp([0.0, -1.0, -2.0])})  # fmt: skip
    lost = pd.DataFrame([{"v": "b", "layer": np.nan, "sample": np.nan, "at_floor": False,
                          "metric": "diverged", "value": 1.0}])  # fmt: skip
    table = curve_slopes(pd.concat([rows, lost]), ["v"]).set_index("v")
    assert table.loc["a", "slope_mu"] == pytest.approx(-1.0) and not table.loc["a", "diverged"]
    assert table.loc["b", "diverged"] and math.isnan(table.loc["b", "slope_mu"])


def test_a_bad_mask_spec_fails_the_config():
    with pytest.raises(ValidationError, match="windw"):
        CurvesConfig(masks=["windw:1"])


def test_real_models_load_in_the_config_dtype_unless_listed_in_float64_models():
    config = CurvesConfig(dtype="bfloat16", float64_models=["smollm2"])
    assert config.dtype == "bfloat16" and CurvesConfig().dtype == "float32"
    tiny = {"n_layers": 1, "seed": 0}
    assert (
        load_real("bert-base", "random", dtype=config.dtype, **tiny).model.dtype == torch.bfloat16
    )
    assert load_real("bert-base", "random", double=True, **tiny).model.dtype == torch.float64
    with pytest.raises(ValidationError, match="dtype"):
        CurvesConfig(dtype="float64")
