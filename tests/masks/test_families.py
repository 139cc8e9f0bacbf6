"""Mask constructors, specs and validation."""

import pytest
import torch

from rankcollapse.errors import ConfigError, InputError, UnknownNameError
from rankcollapse.masks import (
    MASK_FAMILIES,
    causal,
    causal_window,
    check_mask,
    complete,
    dilated,
    from_matrix,
    mask_from_spec,
    random_sparse,
    sinks,
    to_bias,
    window,
)

SPECS = [
    "complete",
    "causal",
    "window:1",
    "causal_window:1",
    "sinks:1:2",
    "dilated:2:2",
    "random:0.1:0",
]


def _by_rule(n, rule):
    """The mask built entry by entry from a rule on (i, j): an independent computation."""
    return torch.tensor([[rule(i, j) for j in range(n)] for i in range(n)], dtype=torch.bool)


@pytest.mark.parametrize("n", [1, 2, 7])
def test_families_match_their_defining_rules(n):
    assert complete(n).equal(_by_rule(n, lambda i, j: True))
    assert causal(n).equal(_by_rule(n, lambda i, j: j <= i))
    assert window(n, 2).equal(_by_rule(n, lambda i, j: abs(i - j) <= 2))
    assert causal_window(n, 2).equal(_by_rule(n, lambda i, j: 0 <= i - j <= 2))
    assert dilated(n, 2, 3).equal(_by_rule(n, lambda i, j: abs(i - j) <= 6 and (i - j) % 3 == 0))
    sink = _by_rule(n, lambda i, j: i < 1 or j < 1 or abs(i - j) <= 1)
    assert sinks(n, 1, 1).equal(sink)


@pytest.mark.parametrize("spec", SPECS)
def test_every_spec_gives_a_valid_mask(spec):
    m = mask_from_spec(spec, 9)
    assert check_mask(m, 9) is m
    assert m.dtype == torch.bool and m.diagonal().all()


def test_specs_equal_their_constructors():
    assert mask_from_spec("window:1", 6).equal(window(6, 1))
    assert mask_from_spec(" causal_window:3", 6).equal(causal_window(6, 3))
    assert mask_from_spec("sinks:1:2", 6).equal(sinks(6, 1, 2))
    assert mask_from_spec("dilated:2:2", 6).equal(dilated(6, 2, 2))
    assert mask_from_spec("random:0.3:4", 6).equal(random_sparse(6, 0.3, seed=4))


def test_mask_families_lists_every_family_with_its_syntax():
    assert set(MASK_FAMILIES) == {s.split(":")[0] for s in SPECS}
    for name, line in MASK_FAMILIES.items():
        assert line.startswith(name)


def test_random_sparse_is_deterministic_by_seed_and_has_about_p_edges():
    a, b = random_sparse(200, 0.1, seed=3), random_sparse(200, 0.1, seed=3)
    assert a.equal(b)
    assert not a.equal(random_sparse(200, 0.1, seed=4))
    off_diagonal = a.sum().item() - 200
    assert abs(off_diagonal / (200 * 199) - 0.1) < 0.01
    assert random_sparse(5, 1.0, seed=0).equal(complete(5))


def test_random_sparse_leaves_the_global_generator_alone():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    random_sparse(10, 0.5, seed=1)
    assert torch.rand(3).equal(expected)


def test_to_bias_is_zero_on_allowed_and_minus_inf_elsewhere():
    bias = to_bias(causal(3), dtype=torch.float32)
    assert bias.dtype == torch.float32
    assert bias.equal(torch.tensor([[0, -torch.inf, -torch.inf], [0, 0, -torch.inf], [0, 0, 0]]))


def test_masked_softmax_with_to_bias_is_row_stochastic_on_the_mask():
    m = window(5, 1)
    a = torch.softmax(torch.zeros(5, 5, dtype=torch.float64) + to_bias(m), dim=-1)
    assert torch.allclose(a, m.double() / m.sum(1, keepdim=True))


def test_from_matrix_accepts_nested_lists_and_composed_masks():
    assert from_matrix([[True, False], [True, True]]).equal(causal(2))
    composed = from_matrix(causal(5) & window(5, 1))
    assert composed.equal(causal_window(5, 1))


def test_check_mask_rejects_a_non_square_matrix():
    with pytest.raises(InputError, match=r"square.*\(2, 3\)"):
        check_mask(torch.ones(2, 3, dtype=torch.bool))


def test_check_mask_says_the_expected_size():
    with pytest.raises(InputError, match=r"for 3 tokens.*4 tokens.*\(4, 4\)"):
        check_mask(complete(3), n=4)


def test_check_mask_rejects_non_boolean_dtype_and_says_how_to_convert():
    with pytest.raises(InputError, match=r"boolean.*float32.*m\.bool\(\)"):
        from_matrix(torch.ones(3, 3))


def test_check_mask_names_the_tokens_missing_a_self_loop():
    m = complete(4)
    m[1, 1] = m[3, 3] = False
    with pytest.raises(InputError, match=r"token\(s\) 1, 3 lack a self-loop.*torch\.eye"):
        from_matrix(m)


def test_check_mask_names_rows_attending_to_nothing():
    m = torch.eye(4, dtype=torch.bool)
    m[2, 2] = False
    with pytest.raises(InputError, match=r"token\(s\) 2 attend to nothing.*self-loops"):
        check_mask(m)


def test_check_mask_rejects_a_non_tensor():
    with pytest.raises(InputError, match="torch.Tensor, got list.*from_matrix"):
        check_mask([[True]])


def test_unknown_mask_family_lists_the_families():
    with pytest.raises(UnknownNameError, match=r"'windw'.*complete, causal, window.*'window'"):
        mask_from_spec("windw:1", 4)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("window", r"'window' takes 1 parameter\(s\) \(w\), got 0.*'window:W'"),
        ("causal:1", r"'causal' takes 0 parameter\(s\).*got 1"),
        ("window:x", r"'window:x'.*w must be an integer >= 0.*'x'"),
        ("window:-1", r"w must be an integer >= 0.*-1"),
        ("dilated:1:0", r"dilation must be an integer >= 1.*got 0.*'dilated:W:D'"),
        ("random:2:0", r"p must be a probability in \[0, 1\].*'2'"),
        ("random:0.1:x", r"seed must be an integer"),
    ],
)
def test_bad_spec_parameters_raise_a_clear_config_error(spec, message):
    with pytest.raises(ConfigError, match=message):
        mask_from_spec(spec, 4)


def test_constructor_parameters_are_checked():
    with pytest.raises(ConfigError, match=r"n must be an integer >= 1.*got 0"):
        complete(0)
    with pytest.raises(ConfigError, match=r"n_sinks must be at most.*n=4, got 5"):
        sinks(4, 5, 1)
    with pytest.raises(ConfigError, match=r"p must be a probability.*-0.5"):
        random_sparse(4, -0.5, seed=0)
