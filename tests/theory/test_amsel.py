"""Amsel et al. constructions: the full-rank head falls monotonically in t and is exact with
hardmax, the N = 2 closed forms agree with Monte Carlo, least squares recovers known maps."""

from __future__ import annotations

import itertools

import pytest
import torch

from rankcollapse.errors import ConfigError
from rankcollapse.tasks import NeighbourTask, relative_mse
from rankcollapse.theory.amsel import (
    fit_output_maps,
    full_rank_error_two_points,
    full_rank_head,
    qk_parameters,
    random_low_rank_heads,
    random_rank_one_error_two_points,
    rank_one_vote,
)

F64 = torch.float64
# Documented temperature: at d = 8, N = 16 the full-rank head's relative MSE is about 1.3e-4
# at t = 1e4 (2e-3 at t = 1e3), so t = 1e4 puts it below 1e-3 with a wide margin.
T_BELOW_1E3 = 1e4


def _sample(task, n, seed):
    return task.sample(n, torch.Generator().manual_seed(seed), F64)


def _error(layer, batch):
    with torch.no_grad():
        return float(relative_mse(layer(batch.queries, batch.x), batch.target))


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_full_rank_error_falls_monotonically_in_t_and_goes_below_1e3():
    batch = _sample(NeighbourTask(8, 16), 4000, 0)
    temperatures = [1, 10, 100, 1e3, T_BELOW_1E3]
    errors = [_error(full_rank_head(8, t).layer, batch) for t in temperatures]
    assert all(b < a for a, b in itertools.pairwise(errors))
    assert errors[-1] < 1e-3


@pytest.mark.parametrize(("target", "points"), [("nearest", "uniform"), ("farthest", "doubled")])
def test_hardmax_full_rank_head_is_exact(target, points):
    batch = _sample(NeighbourTask(6, 10, target=target, points=points), 500, 1)
    head = full_rank_head(6, 1.0, target=target, hard=True).layer
    assert _error(head, batch) == 0.0


def test_full_rank_closed_form_for_two_points_matches_monte_carlo():
    batch = _sample(NeighbourTask(8, 2, points="orthogonal"), 40_000, 2)
    for t in (1.0, 10.0):
        assert _error(full_rank_head(8, t).layer, batch) == pytest.approx(
            full_rank_error_two_points(8, t), rel=0.03
        )
    assert full_rank_error_two_points(8, 0.0) == pytest.approx(0.5)  # p = 1/2: 2 (1/2)^2


def test_rank_one_closed_form_matches_a_fitted_random_head():
    task = NeighbourTask(6, 2, points="orthogonal")
    fit, held_out = _sample(task, 20_000, 3), _sample(task, 20_000, 4)
    heads = fit_output_maps(random_low_rank_heads(6, 1, 1, seed=0), fit.x, fit.queries, fit.target)
    assert _error(heads.layer, held_out) == pytest.approx(
        random_rank_one_error_two_points(6), rel=0.03
    )
    assert random_rank_one_error_two_points(16) > random_rank_one_error_two_points(4)


def test_least_squares_recovers_known_output_maps():
    heads = random_low_rank_heads(5, 2, 3, seed=1)
    maps = torch.randn(3, 5, 5, generator=torch.Generator().manual_seed(0), dtype=F64)
    truth = type(heads.layer).from_weights(
        heads.layer.w_q.detach(), heads.layer.w_k.detach(), maps, hard=True
    )
    batch = _sample(NeighbourTask(5, 4), 2000, 5)
    with torch.no_grad():
        target = truth(batch.queries, batch.x)
    fitted = fit_output_maps(heads, batch.x, batch.queries, target, ridge=0.0)
    assert torch.allclose(fitted.layer.w_o, maps, atol=1e-8)


def test_random_heads_use_orthonormal_subspaces_and_count_parameters():
    layer = random_low_rank_heads(7, 3, 4, seed=2).layer
    gram = layer.w_q @ layer.w_q.transpose(-1, -2)
    assert torch.allclose(gram, torch.eye(3, dtype=F64).expand(4, 3, 3), atol=1e-12)
    assert qk_parameters(7, 3, 4) == 4 * 2 * 3 * 7


def test_bad_constructions_get_a_clear_error():
    with pytest.raises(ConfigError, match="temperature=0.*t > 0"):
        full_rank_head(4, 0.0)
    with pytest.raises(ConfigError, match="d_qk=5 .* d_model=4"):
        random_low_rank_heads(4, 5, 2, seed=0)
    with pytest.raises(ConfigError, match="n_heads=0"):
        random_low_rank_heads(4, 1, 0, seed=0)


def test_rank_one_heads_voting_in_two_layers_approach_the_nearest_neighbour():
    task = NeighbourTask(4, 2, points="orthogonal")
    batch = task.sample(4000, torch.Generator().manual_seed(3), torch.float64)
    errors = {}
    for h in (1, 256):
        heads = random_low_rank_heads(4, 1, h, seed=0)
        errors[h] = float(relative_mse(rank_one_vote(heads, batch.queries, batch.x), batch.target))
    # one head is right with probability 1 - angle(y, x1 - x2) / pi: about 1/2 + a little, so
    # its error (2 per wrong pick) is near 1; the majority of 256 is wrong far less often
    assert 0.6 < errors[1] < 1.0 and errors[256] < errors[1] / 3
    picked = rank_one_vote(heads, batch.queries, batch.x)
    assert (
        ((picked - batch.x[:, :1]).abs().sum(-1).min(-1).values == 0)
        .logical_or((picked - batch.x[:, 1:]).abs().sum(-1).min(-1).values == 0)
        .all()
    )  # the output is always one of the two points
