"""Invariances every state metric must have, parametrized over the registry."""

import pytest
import torch

from rankcollapse.metrics import METRICS, min_sv, mu, res_comp

STATE_METRICS = [name for name, info in METRICS.items() if info.kind == "states"]
SHIFT_INVARIANT = ["res_comp", "mu"]  # centred, absolute: adding 1 c^T changes nothing
SCALE_COVARIANT = ["res_comp", "mu", "min_sv"]  # in the units of x


def _states(seed: int, shape=(4, 7, 5)) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("name", STATE_METRICS)
@pytest.mark.parametrize("shape", [(3, 6, 4), (3, 4, 6)], ids=["n>d", "n<d"])
def test_identical_tokens_read_as_collapsed(name, shape):
    token = _states(1, (shape[0], 1, shape[2]))
    x = token.expand(shape).clone()
    value = METRICS[name].fn(x)
    expected = {
        "cos_mean": 1.0,
        "abs_cos_mean": 1.0,
        "stable_rank": 1.0,
        "effective_rank": 1.0,
        "numerical_rank": 1.0,
    }.get(name, 0.0)  # residuals and min_sv: 0
    scale = x.norm().item() if name in ("res_comp", "mu", "min_sv") else 1.0
    assert torch.allclose(value, torch.full_like(value, expected), atol=1e-12 * scale)


@pytest.mark.parametrize("name", ["res_comp_rel", "res_comp", "mu", "mu_rel"])
def test_mean_centred_residuals_are_exactly_zero_for_identical_tokens(name):
    x = torch.tensor([[0.3, -1.7, 2.0]]).expand(5, 3)
    assert METRICS[name].fn(x).item() == 0.0


@pytest.mark.parametrize("name", SHIFT_INVARIANT)
def test_centred_metrics_ignore_adding_one_vector_to_every_token(name):
    x = _states(2)
    shift = 10 * _states(3, (4, 1, 5))
    assert torch.allclose(METRICS[name].fn(x + shift), METRICS[name].fn(x), rtol=1e-12)


@pytest.mark.parametrize("name", STATE_METRICS)
def test_scaling_the_states_scales_only_absolute_metrics(name):
    x = _states(4)
    factor = 2.5 if name in SCALE_COVARIANT else 1.0
    assert torch.allclose(METRICS[name].fn(-2.5 * x), factor * METRICS[name].fn(x), rtol=1e-11)


@pytest.mark.parametrize("name", STATE_METRICS)
def test_token_order_never_changes_a_metric(name):
    x = _states(5)
    order = torch.randperm(7, generator=torch.Generator().manual_seed(6))
    assert torch.allclose(METRICS[name].fn(x[:, order]), METRICS[name].fn(x), rtol=1e-11)


@pytest.mark.parametrize("name", STATE_METRICS)
def test_batch_dims_are_independent_sequences(name):
    x = _states(7, (2, 3, 6, 4))
    batched = METRICS[name].fn(x)
    one_by_one = torch.stack([METRICS[name].fn(s) for s in x.reshape(6, 6, 4)]).reshape(2, 3)
    assert batched.shape == (2, 3)
    assert torch.allclose(batched, one_by_one, rtol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_any_float_dtype_is_measured_in_float64(dtype):
    x = _states(8).to(dtype)
    for fn in (res_comp, mu, min_sv):
        value = fn(x)
        assert value.dtype == torch.float64
        assert torch.allclose(value, fn(x.double()), rtol=1e-12)
