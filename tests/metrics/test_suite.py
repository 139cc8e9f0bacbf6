"""The suite agrees with the single metrics, flags the dtype floor, and tabulates tidily."""

import pytest
import torch

from rankcollapse.metrics import (
    DEFAULT_METRICS,
    METRICS,
    MetricValue,
    dtype_floor,
    measure_attention,
    measure_states,
    metrics_frame,
)

STATE_METRICS = [name for name, info in METRICS.items() if info.kind == "states"]
ATTENTION_METRICS = [name for name, info in METRICS.items() if info.kind == "attention"]


def _collapsing(noise: float, shape=(3, 8, 6), seed: int = 0) -> torch.Tensor:
    """Identical tokens plus relative noise of size `noise`, in float64."""
    g = torch.Generator().manual_seed(seed)
    token = torch.randn(*shape[:-2], 1, shape[-1], generator=g, dtype=torch.float64)
    return token + noise * torch.randn(shape, generator=g, dtype=torch.float64)


@pytest.mark.parametrize("shape", [(2, 3, 10, 6), (4, 6, 10)], ids=["n>d", "n<d"])
@pytest.mark.parametrize("noise", [1.0, 1e-9], ids=["spread", "nearly-collapsed"])
def test_suite_equals_the_single_metric_functions(shape, noise):
    x = _collapsing(noise, shape).float()
    suite = measure_states(x)
    assert list(suite) == list(DEFAULT_METRICS) == STATE_METRICS
    for name, result in suite.items():
        single = METRICS[name].fn(x)
        assert result.value.shape == result.at_floor.shape == shape[:-2]
        assert result.value.dtype == torch.float64 and result.at_floor.dtype == torch.bool
        assert torch.allclose(result.value, single, rtol=1e-13, atol=0), name


def test_attention_suite_equals_the_single_metric_functions():
    a = torch.softmax(torch.randn(2, 3, 5, 5, generator=torch.Generator().manual_seed(1)), -1)
    edges = torch.ones(5, 5, dtype=torch.bool).tril()
    suite = measure_attention(a, edges=edges)
    assert list(suite) == ATTENTION_METRICS
    for name, result in suite.items():
        assert torch.equal(result.value, METRICS[name].fn(a, edges=edges))
        assert result.value.shape == (2, 3)


def test_suite_computes_only_the_metrics_asked_for_in_that_order():
    out = measure_states(_collapsing(1.0), metrics=["min_sv", "mu"])
    assert list(out) == ["min_sv", "mu"]
    assert isinstance(out["mu"], MetricValue)


def test_float32_floor_flags_residuals_that_float64_would_resolve():
    x = _collapsing(1e-9)  # relative spread ~1e-9: below float32's floor, far above float64's
    as_float32 = measure_states(x, source_dtype=torch.float32)
    as_float64 = measure_states(x)
    for name in STATE_METRICS:
        assert bool(as_float32[name].at_floor.all()) == METRICS[name].vanishes, name
        assert not bool(as_float64[name].at_floor.any()), name
        assert torch.equal(as_float32[name].value, as_float64[name].value)


def test_source_dtype_defaults_to_the_dtype_of_x():
    x = _collapsing(1e-9)
    assert bool(measure_states(x.float(), metrics=["mu_rel"])["mu_rel"].at_floor.all())


def test_spread_states_are_never_at_the_floor():
    out = measure_states(_collapsing(1.0), source_dtype=torch.float16)
    assert not any(bool(result.at_floor.any()) for result in out.values())


def test_floor_rule_is_a_small_multiple_of_the_dtype_epsilon():
    assert 1e-7 < dtype_floor(torch.float32) < 1e-5
    assert 1e-16 < dtype_floor(torch.float64) < 1e-14


def test_min_sv_floor_follows_the_smallest_direction_only():
    # spread in 2 of 3 directions, the third at 1e-9: only min_sv sits at float32's floor
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 9, 3, generator=g, dtype=torch.float64)
    x[..., 2] *= 1e-9
    out = measure_states(x, source_dtype=torch.float32)
    assert bool(out["min_sv"].at_floor.all())
    assert not bool(out["mu_rel"].at_floor.any()) and not bool(out["rank1_rel"].at_floor.any())


def test_uniform_attention_sits_at_the_floor_of_dist_uniform_only():
    out = measure_attention(torch.full((2, 4, 4), 0.25))
    assert bool(out["attn_dist_uniform"].at_floor.all())
    assert not bool(out["attn_entropy"].at_floor.any())
    assert not bool(out["attn_min_edge"].at_floor.any())


def test_metrics_frame_is_long_with_ids_first_and_flattened_samples():
    out = measure_states(_collapsing(1.0, (2, 3, 5, 4)), metrics=["mu", "stable_rank"])
    frame = metrics_frame(out, model="toy", layer=3)
    assert list(frame.columns) == ["model", "layer", "sample", "metric", "value", "at_floor"]
    assert len(frame) == 2 * 6
    assert frame["sample"].tolist() == list(range(6)) * 2
    assert set(frame["model"]) == {"toy"} and set(frame["layer"]) == {3}
    mu_rows = frame[frame["metric"] == "mu"]["value"].tolist()
    assert mu_rows == out["mu"].value.reshape(-1).tolist()
    assert frame["at_floor"].dtype == bool


def test_metrics_frame_of_an_unbatched_input_has_sample_zero():
    frame = metrics_frame(measure_states(_collapsing(1.0)[0], metrics=["mu"]))
    assert frame["sample"].tolist() == [0]


def test_metrics_frame_of_nothing_has_the_result_columns():
    assert list(metrics_frame({}, layer=0).columns) == [
        "layer",
        "sample",
        "metric",
        "value",
        "at_floor",
    ]


def test_values_carry_no_gradient(rng):
    x = torch.randn(2, 5, 4, requires_grad=True, generator=rng)
    assert not any(result.value.requires_grad for result in measure_states(x).values())


def test_one_feature_states_are_rank_one(rng):
    out = measure_states(torch.randn(6, 1, dtype=torch.float64, generator=rng))
    assert out["rank1_rel"].value.item() == pytest.approx(0.0, abs=1e-12)
    assert out["numerical_rank"].value.item() == 1.0  # a count: exact
    assert out["abs_cos_mean"].value.item() == pytest.approx(1.0, abs=1e-12)


def test_an_all_zero_state_reads_zero_everywhere():
    out = measure_states(torch.zeros(4, 3))
    assert all(result.value.item() == 0.0 for result in out.values())
