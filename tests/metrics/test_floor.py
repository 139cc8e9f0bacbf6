"""Floor flags only for metrics that vanish, declared once in the registry; the per-layer
summary says how many sequences sit at the floor and whether a mean is signal."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from rankcollapse.errors import InputError
from rankcollapse.metrics import (
    METRICS,
    measure_attention,
    measure_states,
    metrics_frame,
    summarize_samples,
)

VANISHING = {
    "res_comp_rel", "res_comp", "rank1_rel", "mu", "mu_rel", "min_sv", "min_sv_rel",
    "attn_dist_uniform",
}  # fmt: skip


def _collapsed_states(noise: float, seed: int = 0) -> torch.Tensor:
    """Two batches of 8 tokens in 6 dims: one token repeated, plus `noise` x Gaussian noise."""
    g = torch.Generator().manual_seed(seed)
    token = torch.randn(2, 1, 6, generator=g, dtype=torch.float64)
    return token + noise * torch.randn(2, 8, 6, generator=g, dtype=torch.float64)


def _measure(name: str, collapsed: bool) -> torch.Tensor:
    """at_floor of one metric on a collapsed (or spread) input from float32 activations."""
    if METRICS[name].kind == "states":
        x = _collapsed_states(1e-12 if collapsed else 1.0)
        return measure_states(x, metrics=[name], source_dtype=torch.float32)[name].at_floor
    logits = (
        torch.zeros(2, 5, 5)
        if collapsed
        else 4 * torch.randn(2, 5, 5, generator=torch.Generator().manual_seed(1))
    )
    return measure_attention(torch.softmax(logits, -1), metrics=[name])[name].at_floor


def test_the_vanishing_metrics_are_the_residuals_mu_min_sv_and_dist_uniform():
    assert {name for name, info in METRICS.items() if info.vanishes} == VANISHING


@pytest.mark.parametrize("name", list(METRICS))
def test_a_collapsed_input_is_at_the_floor_only_for_vanishing_metrics(name):
    assert _measure(name, collapsed=True).tolist() == [METRICS[name].vanishes] * 2


@pytest.mark.parametrize("name", list(METRICS))
def test_a_spread_input_is_never_at_the_floor(name):
    assert not bool(_measure(name, collapsed=False).any())


@pytest.mark.parametrize("name", ["cos_mean", "abs_cos_mean", "stable_rank", "numerical_rank"])
def test_cosines_and_ranks_of_identical_tokens_are_exact_values_never_flagged(name):
    out = measure_states(_collapsed_states(0.0), metrics=[name], source_dtype=torch.float16)
    assert not bool(out[name].at_floor.any())
    assert torch.allclose(out[name].value, torch.ones(2, dtype=torch.float64))


@pytest.mark.parametrize("name", ["res_comp", "mu", "min_sv"])
def test_absolute_metrics_are_flagged_by_their_relative_size(name):
    # 1e-9 in absolute units is no floor for states of size 1e-6; 1e-9 of their size is
    tiny = 1e-6 * _collapsed_states(1.0)
    assert not bool(measure_states(tiny, source_dtype=torch.float32)[name].at_floor.any())
    relative = 1e-6 * _collapsed_states(1e-9)
    assert bool(measure_states(relative, source_dtype=torch.float32)[name].at_floor.all())


@pytest.mark.parametrize("name", sorted(VANISHING - {"attn_dist_uniform"}))
def test_spread_states_small_enough_to_underflow_their_dtype_are_at_the_floor(name):
    """Entries of 1e-33 are below tiny / eps of float32 (9.9e-32) and far above it in float64:
    the same spread states are underflow noise for the one and signal for the other."""
    underflowed = 1e-33 * _collapsed_states(1.0)
    as_float32 = measure_states(underflowed, metrics=[name], source_dtype=torch.float32)[name]
    as_float64 = measure_states(underflowed, metrics=[name], source_dtype=torch.float64)[name]
    assert bool(as_float32.at_floor.all()) and not bool(as_float64.at_floor.any())
    assert torch.equal(as_float32.value, as_float64.value)  # flagged, never changed
    above = measure_states(
        1e-30 * _collapsed_states(1.0), metrics=[name], source_dtype=torch.float32
    )
    assert not bool(above[name].at_floor.any())  # 1e-30: rounding still decides
    zero = measure_states(torch.zeros(2, 8, 6), metrics=[name])[name]  # flushed to 0
    assert bool(zero.at_floor.all())


def _frame() -> pd.DataFrame:
    """Two layers of 4 sequences: layer 0 spread, layer 1 with 3 of 4 sequences collapsed."""
    x0 = _collapsed_states(1.0).reshape(1, 2, 8, 6).expand(2, 2, 8, 6).reshape(4, 8, 6)
    x1 = torch.cat([_collapsed_states(1e-12), _collapsed_states(1e-12, 1)[:1], x0[:1]])
    frames = [
        metrics_frame(
            measure_states(x, metrics=["mu_rel", "cos_mean"], source_dtype=torch.float32),
            model="toy",
            layer=layer,
        )
        for layer, x in enumerate([x0, x1])
    ]
    return pd.concat(frames, ignore_index=True)


def test_summary_has_one_row_per_ids_layer_and_metric_in_first_seen_order():
    summary = summarize_samples(_frame())
    assert list(summary.columns) == [
        "model",
        "layer",
        "metric",
        "n_samples",
        "mean",
        "q10",
        "q50",
        "q90",
        "share_at_floor",
        "n_at_floor",
        "mean_above_floor",
        "mean_is_signal",
    ]
    assert summary[["layer", "metric"]].values.tolist() == [
        [0, "mu_rel"],
        [0, "cos_mean"],
        [1, "mu_rel"],
        [1, "cos_mean"],
    ]
    assert summary["n_samples"].tolist() == [4, 4, 4, 4]


def test_summary_counts_the_share_at_the_floor_and_a_mixed_mean_is_no_signal():
    frame = _frame()
    summary = summarize_samples(frame).set_index(["layer", "metric"])
    assert summary.loc[(1, "mu_rel"), "share_at_floor"] == 0.75
    assert not summary.loc[(1, "mu_rel"), "mean_is_signal"]
    assert summary.loc[(0, "mu_rel"), "share_at_floor"] == 0.0
    assert summary.loc[(0, "mu_rel"), "mean_is_signal"]
    # cosines are never at a floor: their mean is signal even when the tokens collapsed
    assert summary.loc[(1, "cos_mean"), "mean_is_signal"]
    values = frame[(frame.layer == 1) & (frame.metric == "mu_rel")]["value"]
    assert summary.loc[(1, "mu_rel"), "mean"] == pytest.approx(values.mean(), rel=1e-15)
    assert summary.loc[(1, "mu_rel"), "q50"] == pytest.approx(np.quantile(values, 0.5))
    flags = frame[(frame.layer == 1) & (frame.metric == "mu_rel")]["at_floor"]
    assert summary.loc[(1, "mu_rel"), "n_at_floor"] == 3
    above = summary.loc[(1, "mu_rel"), "mean_above_floor"]
    assert above == pytest.approx(values[~flags].mean(), rel=1e-15) and above > 1e-3
    layer0 = summary.loc[(0, "mu_rel")]
    assert layer0["mean_above_floor"] == pytest.approx(layer0["mean"], rel=1e-15)


def test_the_mean_above_the_floor_is_nan_when_every_sample_is_at_it():
    frame = pd.DataFrame({"layer": 4, "sample": [0, 1], "metric": "min_sv_rel",
                          "value": [1e-9, 2e-9], "at_floor": True})  # fmt: skip
    row = summarize_samples(frame).iloc[0]
    assert row["n_at_floor"] == 2 and row["share_at_floor"] == 1.0
    assert math.isnan(row["mean_above_floor"]) and row["mean"] == pytest.approx(1.5e-9)


def test_summary_takes_any_quantiles():
    summary = summarize_samples(_frame(), quantiles=(0.05, 0.5, 0.95))
    assert {"q5", "q50", "q95"} <= set(summary.columns)
    assert (summary["q5"] <= summary["q50"]).all() and (summary["q50"] <= summary["q95"]).all()


def test_summary_of_a_frame_without_the_result_columns_is_a_clear_error():
    with pytest.raises(InputError, match=r"lacks column\(s\) \['at_floor'\].*metrics_frame"):
        summarize_samples(pd.DataFrame({"layer": [0], "metric": ["mu"], "value": [1.0]}))
    with pytest.raises(InputError, match=r"quantiles must lie in \[0, 1\], got \(1.5,\)"):
        summarize_samples(_frame(), quantiles=(1.5,))


def test_summary_reads_a_frame_back_from_csv(tmp_path):
    frame = _frame()
    frame.to_csv(tmp_path / "results.csv", index=False)
    again = summarize_samples(pd.read_csv(tmp_path / "results.csv"))
    pd.testing.assert_frame_equal(again, summarize_samples(frame))
    assert not math.isnan(again["mean"].iloc[0])
