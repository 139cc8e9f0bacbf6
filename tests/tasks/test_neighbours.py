"""Nearest-neighbour tasks: labels against brute force, point sets, seeded streams, the
relative MSE, and bad input."""

from __future__ import annotations

import pytest
import torch

from rankcollapse.errors import ConfigError
from rankcollapse.tasks import NeighbourTask, farthest_point, nearest_neighbour, relative_mse

F64 = torch.float64


def test_nearest_neighbour_labels_match_brute_force():
    batch = NeighbourTask(5, 7, n_queries=3).sample(20, torch.Generator().manual_seed(0), F64)
    for b in range(20):
        for i in range(3):
            y = batch.queries[b, i]
            best = max(range(7), key=lambda j: float(batch.x[b, j] @ y))
            assert torch.equal(batch.target[b, i], batch.x[b, best])


def test_farthest_point_labels_match_brute_force():
    batch = NeighbourTask(4, 6, target="farthest").sample(10, torch.Generator().manual_seed(1), F64)
    assert torch.equal(batch.queries, batch.x)
    for b in range(10):
        for i in range(6):
            far = min(range(6), key=lambda j: float(batch.x[b, i] @ batch.x[b, j]))
            assert torch.equal(batch.target[b, i], batch.x[b, far])
    assert torch.equal(farthest_point(batch.x), nearest_neighbour(batch.x, -batch.x))


@pytest.mark.parametrize("points", ["uniform", "orthogonal", "doubled"])
def test_every_point_set_lies_on_the_unit_sphere(points):
    x = NeighbourTask(6, 4, points=points).sample_points(8, torch.Generator().manual_seed(2), F64)
    assert x.shape == (8, 4, 6)
    assert torch.allclose(x.norm(dim=-1), torch.ones(8, 4, dtype=F64), atol=1e-12)


def test_orthogonal_sets_are_orthonormal_and_doubled_sets_hold_antipodes():
    g = torch.Generator().manual_seed(3)
    q = NeighbourTask(6, 4, points="orthogonal").sample_points(5, g, F64)
    assert torch.allclose(
        q @ q.transpose(-1, -2), torch.eye(4, dtype=F64).expand(5, 4, 4), atol=1e-12
    )
    d = NeighbourTask(6, 4, points="doubled").sample_points(5, g, F64)
    assert torch.equal(d[:, 2:], -d[:, :2])


def test_a_stream_is_a_function_of_its_seed():
    task = NeighbourTask(3, 4)
    a, b, c = task.stream(2, seed=7), task.stream(2, seed=7), task.stream(2, seed=8)
    first_a, first_b, first_c = next(a), next(b), next(c)
    assert torch.equal(first_a.x, first_b.x) and torch.equal(first_a.queries, first_b.queries)
    assert not torch.equal(first_a.x, first_c.x)
    assert not torch.equal(next(a).x, first_a.x)  # fresh samples every batch


def test_relative_mse_is_one_for_the_zero_predictor_and_zero_when_exact():
    batch = NeighbourTask(4, 5).sample(100, torch.Generator().manual_seed(4), F64)
    assert relative_mse(torch.zeros_like(batch.target), batch.target) == 1.0
    assert relative_mse(batch.target, batch.target) == 0.0
    target = torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]]])
    prediction = torch.tensor([[[0.5, 0.0]], [[0.0, 0.0]]])
    assert relative_mse(prediction, target).item() == pytest.approx((0.25 + 1.0) / 2)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"d_model": 4, "n_points": 0}, r"n_points=0.*N >= 1"),
        (
            {"d_model": 4, "n_points": 5, "points": "orthogonal"},
            r"n_points <= d_model.*5 > d_model=4",
        ),
        ({"d_model": 4, "n_points": 3, "points": "doubled"}, r"even; got 3"),
        ({"d_model": 4, "n_points": 3, "target": "nearst"}, r"unknown target 'nearst'.*nearest"),
        ({"d_model": 0, "n_points": 3}, r"d_model=0"),
    ],
)
def test_bad_task_gets_a_clear_error(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        NeighbourTask(**kwargs)
