"""Theorem 3 equilibria and the 2-D counterexample of Wu et al. 2024."""

import itertools
import math

import pytest
import torch

from rankcollapse.errors import ConfigError
from rankcollapse.theory.equilibria import (
    attention_step,
    counterexample_basin_arc,
    counterexample_point_b,
    ring_inputs,
    theorem3_equilibria,
    theorem3_equilibrium,
    theorem3_stable_rank_bound,
    theorem3_value_matrix,
    trajectory,
)


def _ranks(x: torch.Tensor) -> torch.Tensor:
    s = torch.linalg.svdvals(x)  # (..., n)
    return (s > 1e-10 * s[..., :1]).sum(dim=-1)


@pytest.mark.parametrize("n", [3, 4, 6, 8])
def test_every_theorem3_equilibrium_is_a_fixed_point_of_its_stated_rank(n):
    w_v = theorem3_value_matrix(n, float(n))
    for k in range(1, n + 1):
        x = torch.stack(theorem3_equilibria(n, n, float(n), k))  # (2^k, n, n)
        assert len(x) == 2**k
        assert (attention_step(x, w_v) - x).abs().max() < 1e-12
        assert bool((_ranks(x) == k).all())
        assert torch.allclose(x.norm(dim=-1), torch.ones(n, dtype=torch.float64))


def test_theorem3_sign_choices_give_distinct_equilibria():
    equilibria = torch.stack(theorem3_equilibria(4, 4, 5.0, 3))
    gaps = [float((a - b).abs().max()) for a, b in itertools.combinations(equilibria, 2)]
    assert min(gaps) > 0.1


def test_theorem3_rank2_equilibrium_matches_hand_computation():
    # N = 3, k = 2: m = 2 tokens at e_3, token 3 = (0, -2/w, sqrt(1 - 4/w^2)); w = 4.
    x = theorem3_equilibrium(3, 3, 4.0, [1, 1])
    expected = torch.tensor([[0, 0, 1], [0, 0, 1], [0, -0.5, math.sqrt(0.75)]], dtype=torch.float64)
    assert torch.allclose(x, expected, atol=1e-15)


def test_full_rank_equilibria_respect_the_stable_rank_bound():
    for n, w in [(3, 3.0), (4, 4.0), (6, 7.0), (8, 8.0)]:
        for x in theorem3_equilibria(n, n, w, n):
            s = torch.linalg.svdvals(x)
            assert float((s**2).sum() / s[0] ** 2) <= theorem3_stable_rank_bound(n, w)


def test_theorem3_rejects_fewer_tokens_than_dimensions():
    with pytest.raises(ConfigError, match="n_tokens=3 and d_model=4.*n_tokens == d_model"):
        theorem3_equilibrium(3, 4, 5.0, [1])


def test_theorem3_rejects_w_below_n():
    with pytest.raises(ConfigError, match="w >= N, got w=2.5 with N=4.*pass w >= 4"):
        theorem3_equilibria(4, 4, 2.5, 2)


def test_theorem3_rejects_bad_signs():
    with pytest.raises(ConfigError, match=r"signs must be 1 to 3 entries.*got \[1, 0\]"):
        theorem3_equilibrium(3, 3, 3.0, [1, 0])


@pytest.mark.parametrize("w", [1.5, 2.0, 4.0])
def test_counterexample_basin_endpoints_match_the_spec_arc(w):
    n_angles = 360
    angles, x = ring_inputs(n_angles)
    final = trajectory(x, theorem3_value_matrix(2, w), 1000)[-1]
    in_basin = (final[:, 1] - counterexample_point_b(w)).norm(dim=-1) < 1e-6
    collapsed = (final[:, 1] - final[:, 0]).norm(dim=-1) < 1e-6
    assert bool((in_basin | collapsed).all())
    start, end = counterexample_basin_arc(w)
    step = 360.0 / n_angles
    inside = angles[in_basin]
    # The basin is one contiguous arc whose first and last ring points lie within one step
    # of arccos(-1/w) and 270 degrees.
    where = torch.nonzero(in_basin).flatten()
    assert len(where) == int(where.max() - where.min()) + 1
    assert abs(float(inside.min()) - start) <= step
    assert abs(float(inside.max()) - end) <= step


def test_counterexample_point_b_is_a_fixed_point_with_token1_at_north():
    w = 3.0
    x = torch.stack([torch.tensor([0.0, 1.0], dtype=torch.float64), counterexample_point_b(w)])
    assert (attention_step(x, theorem3_value_matrix(2, w)) - x).abs().max() < 1e-15


def test_counterexample_without_layernorm_collapses():
    _, x = ring_inputs(72)
    final = trajectory(x, theorem3_value_matrix(2, 2.0), 200, norm=False)[-1]
    gap = (final[:, 1] - final[:, 0]).norm(dim=-1)
    assert float(gap.max()) < 1e-12


def test_counterexample_rejects_w_at_most_one():
    with pytest.raises(ConfigError, match="w > 1, got w=1.0"):
        counterexample_basin_arc(1.0)
