import itertools

import pytest
import torch

from rankcollapse.errors import ConfigError, InputError
from rankcollapse.tasks.convex_hull import convex_hull_data, hull_vertex_labels


def _in_triangle(p, a, b, c) -> bool:
    def cross(o, u, v):
        return (u[0] - o[0]) * (v[1] - o[1]) - (u[1] - o[1]) * (v[0] - o[0])

    signs = [cross(a, b, p), cross(b, c, p), cross(c, a, p)]
    return all(s >= 0 for s in signs) or all(s <= 0 for s in signs)


def _brute_force_vertices(points: list[list[float]]) -> list[int]:
    """A point is a hull vertex iff no triangle of three other points contains it (2-D Caratheodory)."""
    labels = []
    for i, p in enumerate(points):
        others = points[:i] + points[i + 1 :]
        inside = any(_in_triangle(p, a, b, c) for a, b, c in itertools.combinations(others, 3))
        labels.append(0 if inside else 1)
    return labels


def test_hull_labels_match_a_brute_force_check_on_small_sets():
    data = convex_hull_data(40, seed=5, n_points=7)
    for points, labels in zip(data.inputs.double().tolist(), data.targets.tolist(), strict=True):
        assert labels == _brute_force_vertices(points)


def test_hull_labels_of_a_hand_made_set():
    points = torch.tensor([[[0.0, 0.0], [4.0, 0.0], [2.0, 1.0], [2.0, 3.0], [0.0, 4.0]]])
    assert hull_vertex_labels(points).tolist() == [[1, 1, 0, 1, 1]]


def test_convex_hull_data_shape_seed_and_baselines():
    data = convex_hull_data(300, seed=1)
    assert data.inputs.shape == (300, 10, 2) and data.inputs.dtype == torch.float32
    assert torch.equal(data.inputs, convex_hull_data(300, seed=1).inputs)
    share_on_hull = float(data.targets.double().mean())
    assert data.baselines()["majority"] == pytest.approx(max(share_on_hull, 1 - share_on_hull))
    assert data.baselines()["random"] == pytest.approx(0.5, abs=0.05)


def test_bad_points_get_clear_errors():
    with pytest.raises(InputError, match=r"shape \(b, n, 2\).*got \(4, 2\)"):
        hull_vertex_labels(torch.zeros(4, 2))
    with pytest.raises(ConfigError, match="n_points must be >= 3"):
        convex_hull_data(3, seed=0, n_points=2)
