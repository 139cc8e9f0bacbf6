"""Bad input fails at the boundary, saying what was wrong, what is allowed and how to fix it.

Every draw takes `generator=rng`, the seeded torch Generator of the `rng` fixture (tests/conftest.py).
"""

import pytest
import torch

from rankcollapse.errors import InputError, UnknownNameError
from rankcollapse.metrics import (
    METRICS,
    attn_entropy,
    get_metric,
    measure_attention,
    measure_states,
    metrics_frame,
    mu,
)

STATE_METRICS = [name for name, info in METRICS.items() if info.kind == "states"]


@pytest.mark.parametrize("name", STATE_METRICS)
def test_wrong_mask_shape_names_both_shapes_and_the_fix(name, rng):
    x = torch.randn(4, 128, 8, generator=rng)
    with pytest.raises(
        InputError,
        match=r"mask has shape \(4, 127\) but x has 128 tokens "
        r"\(x.shape=\(4, 128, 8\)\); pass a boolean mask of shape \(4, 128\)",
    ):
        METRICS[name].fn(x, torch.ones(4, 127, dtype=torch.bool))


def test_nan_and_inf_are_counted_and_the_first_is_located(rng):
    x = torch.randn(3, 6, 4, generator=rng)
    x[1, 5, 0] = float("nan")
    x[1, 5, 2] = float("nan")
    x[2, 0, 1] = float("inf")
    with pytest.raises(
        InputError,
        match=r"x has 2 NaN and 1 Inf value\(s\) \(first: sample 1, "
        r"token 5\); metrics need finite hidden states",
    ):
        mu(x)


def test_nan_in_a_pad_is_ignored(rng):
    x = torch.randn(2, 5, 3, generator=rng)
    mask = torch.ones(2, 5, dtype=torch.bool)
    mask[0, 4] = False
    x[0, 4] = float("nan")
    assert torch.isfinite(mu(x, mask)).all()


def test_sequence_with_fewer_than_two_real_tokens_is_rejected(rng):
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[2, 1:] = False
    with pytest.raises(InputError, match=r"1 real token\(s\) in sample 2 .*at least 2 real tokens"):
        mu(torch.randn(3, 5, 4, generator=rng), mask)
    with pytest.raises(InputError, match=r"x has 1 token\(s\) per sequence.*at least 2 tokens"):
        mu(torch.randn(3, 1, 4, generator=rng))


def test_zero_features_are_rejected(rng):
    with pytest.raises(InputError, match=r"x has d = 0 features \(x.shape=\(2, 5, 0\)\)"):
        mu(torch.randn(2, 5, 0, generator=rng))


def test_integer_states_are_rejected_with_the_conversion():
    with pytest.raises(InputError, match=r"x has dtype torch.int64.*floating-point.*x.float\(\)"):
        mu(torch.ones(2, 3, dtype=torch.int64))


def test_non_tensor_and_flat_inputs_are_rejected():
    with pytest.raises(InputError, match="x must be a torch.Tensor, got list"):
        mu([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(
        InputError, match=r"x has shape \(5,\); hidden states need shape \(..., n, d\)"
    ):
        mu(torch.ones(5))


def test_integer_zero_one_masks_are_accepted_and_others_rejected(rng):
    x = torch.randn(2, 4, 3, generator=rng)
    as_int = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])
    assert torch.equal(mu(x, as_int), mu(x, as_int.bool()))
    with pytest.raises(InputError, match="mask has dtype torch.float32.*boolean"):
        mu(x, as_int.float())


def test_unknown_metric_name_lists_known_names_and_suggests_the_closest(rng):
    with pytest.raises(UnknownNameError, match="unknown metric 'mu_rell'.*Did you mean 'mu_rel'"):
        get_metric("mu_rell")
    with pytest.raises(UnknownNameError, match="unknown metric 'stable_rnk'.*Known: res_comp_rel"):
        measure_states(torch.randn(2, 3, 4, generator=rng), metrics=["stable_rnk"])


def test_a_metric_of_the_other_kind_points_to_the_right_suite(rng):
    with pytest.raises(
        UnknownNameError,
        match="'attn_entropy' is an attention metric; it reads attention weights, which",
    ):
        measure_states(torch.randn(2, 3, 4, generator=rng), metrics=["attn_entropy"])
    with pytest.raises(
        UnknownNameError,
        match=r"'mu' is a state metric; it reads hidden states \(Python: metrics.measure_states\)",
    ):
        measure_attention(torch.full((3, 3), 1 / 3), metrics=["mu"])


def test_bad_source_dtype_is_rejected(rng):
    with pytest.raises(InputError, match="source_dtype is torch.int32"):
        measure_states(torch.randn(2, 3, 4, generator=rng), source_dtype=torch.int32)


def test_attention_rows_must_sum_to_one_over_real_keys():
    a = torch.full((2, 3, 3), 1 / 3)
    mask = torch.tensor([[True, True, False], [True, True, True]])
    with pytest.raises(
        InputError,
        match=r"2 real query row\(s\) not summing to 1 .*first: sample 0, "
        r"query 0 sums to 0.666667.*check that the mask is the one the model used",
    ):
        attn_entropy(a, mask)


def test_attention_must_be_square_nonnegative_and_leave_every_query_a_key():
    with pytest.raises(
        InputError, match=r"a has shape \(3, 4\); attention needs shape \(..., n, n\)"
    ):
        attn_entropy(torch.full((3, 4), 0.25))
    with pytest.raises(InputError, match=r"negative weight"):
        attn_entropy(torch.tensor([[1.5, -0.5], [0.5, 0.5]]))
    no_key = torch.tensor([[False, False], [True, True]])
    with pytest.raises(InputError, match=r"edges allow no real key for 1 real query row.*query 0"):
        attn_entropy(torch.eye(2), edges=no_key)
    with pytest.raises(InputError, match=r"edges has shape \(3, 3\) but a.shape=\(2, 2\)"):
        attn_entropy(torch.eye(2), edges=torch.ones(3, 3, dtype=torch.bool))
    with pytest.raises(InputError, match="edges has dtype torch.int64; pass a boolean"):
        attn_entropy(torch.eye(2), edges=torch.ones(2, 2, dtype=torch.int64))


def test_per_head_attention_takes_a_broadcast_mask(rng):
    a = torch.softmax(torch.randn(2, 4, 5, 5, generator=rng), -1)
    mask = torch.ones(2, 5, dtype=torch.bool)
    assert attn_entropy(a, mask[:, None, :]).shape == (2, 4)


def test_metrics_frame_rejects_ids_that_clash_with_result_columns(rng):
    with pytest.raises(InputError, match=r"id column\(s\) \['sample'\] clash"):
        metrics_frame(measure_states(torch.randn(2, 3, 4, generator=rng), metrics=["mu"]), sample=1)


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        ((0, 5, 4), r"x has no sequences \(x.shape=\(0, 5, 4\): a batch dimension is 0\)"),
        ((3, 0, 5, 4), r"x has no sequences \(x.shape=\(3, 0, 5, 4\)"),
        ((2, 0, 4), r"x has 0 token\(s\) per sequence"),
        ((2, 5, 0), r"x has d = 0 features"),
    ],
    ids=["no-samples", "no-samples-inner", "no-tokens", "no-width"],
)
@pytest.mark.parametrize("name", STATE_METRICS + ["suite"])
def test_empty_states_are_a_clear_error(shape, message, name, rng):
    call = measure_states if name == "suite" else METRICS[name].fn
    with pytest.raises(InputError, match=message):
        call(torch.randn(shape, generator=rng))


def test_empty_attention_is_a_clear_error():
    with pytest.raises(InputError, match=r"a has no sequences \(a.shape=\(0, 3, 3\)"):
        measure_attention(torch.full((0, 3, 3), 1 / 3))
    with pytest.raises(InputError, match=r"a has 0 token\(s\) per sequence"):
        attn_entropy(torch.zeros(2, 0, 0))
