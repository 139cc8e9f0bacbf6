"""wu2024-masks: the collapse-rate fit, mask radii, and the mask-rate ordering on a small toy."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from rankcollapse.errors import ConfigError
from rankcollapse.experiments import get_experiment
from rankcollapse.experiments.wu2024_masks import (
    collapse_rate,
    kendall_concordance,
    mask_radius,
    summarize,
    units,
)

EXP = get_experiment("wu2024-masks")
SMALL_TOY = {
    "models": ["toy"],
    "masks": ["complete", "causal", "window:1", "causal_window:1"],
    "variants": ["san"],
    "toy_layers": 20,
    "toy_d_model": 16,
    "toy_tokens": 12,
    "toy_samples": 3,
}


@pytest.fixture(scope="module")
def toy_run(run_quick):
    config, results = run_quick(EXP.name, SMALL_TOY)
    return config, results, summarize(config, results)


def test_units_are_model_by_mask():
    config = EXP.make_config("quick", {"models": ["toy", "minilm"], "masks": ["causal"]})
    assert units(config) == [
        {"model": "toy", "mask": "causal"},
        {"model": "minilm", "mask": "causal"},
    ]


def test_collapse_rate_recovers_a_geometric_decay_and_stops_at_the_floor():
    layers = np.arange(6.0)
    curve = pd.DataFrame(
        {"layer": layers, "sample": 0, "value": 3.0 * np.exp(-0.7 * layers),
         "at_floor": [False, False, False, False, True, True]}
    )  # fmt: skip
    rate, n_fit = collapse_rate(curve)
    assert n_fit == 4
    assert rate == pytest.approx(0.7, rel=1e-12)


def test_mask_radius_matches_the_spec_and_is_infinite_without_a_center():
    assert mask_radius("window:1", 16) == math.ceil(15 / 2)  # 8
    assert mask_radius("causal_window:1", 16) == 15
    assert mask_radius("complete", 16) == 1
    assert mask_radius("dilated:1:2", 16) == math.inf


def test_kendall_concordance_counts_only_pairs_of_different_radius():
    assert kendall_concordance([1, 1, 2], [3.0, 1.0, 2.0]) == 0.5
    assert math.isnan(kendall_concordance([1, 1], [1.0, 2.0]))


def test_pure_san_collapses_under_every_mask_on_a_small_toy(toy_run):
    _, _, summary = toy_run
    claim = next(c for c in summary.claims if c.id == "san-collapses-every-mask")
    assert claim.passed, claim


def test_more_local_masks_collapse_more_slowly_on_a_small_toy(toy_run):
    _, _, summary = toy_run
    rates = summary.tables["collapse_rates"]
    san = rates[rates["variant"] == "san"].set_index("mask")["rate"]
    assert san["complete"] > san["causal"] > san["window:1"]
    assert san["causal"] > san["causal_window:1"]
    claim = next(c for c in summary.claims if c.id == "local-masks-slower@toy/eval")
    assert claim.passed, claim


def test_rows_are_tidy_and_float64(toy_run):
    config, results, _ = toy_run
    assert list(results.columns[:6]) == ["model", "init", "variant", "mask", "mode", "layer"]
    assert results["value"].dtype == np.float64
    per_curve = config.toy_samples * (config.toy_layers + 1) * 2  # samples x layers x metrics
    assert len(results) == per_curve * len(config.variants) * len(config.masks)


def test_unknown_mask_family_fails_before_any_unit():
    with pytest.raises(ConfigError, match="masks"):
        EXP.make_config("quick", {"masks": ["windw:1"]})


def test_a_diverged_curve_is_reported_in_the_notes(toy_run):
    config, results, _ = toy_run
    diverged = pd.DataFrame(
        [{"model": "toy", "init": "random", "variant": "san+skip", "mask": "causal",
          "mode": "train", "layer": np.nan, "sample": np.nan, "metric": "diverged",
          "value": 1.0, "at_floor": False}]
    )  # fmt: skip
    summary = summarize(config, pd.concat([results, diverged], ignore_index=True))
    assert any("san+skip (train, mask causal)" in note and "overflowed" in note
               for note in summary.notes)  # fmt: skip
