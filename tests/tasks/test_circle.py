import math

import pytest
import torch

from rankcollapse.errors import ConfigError
from rankcollapse.tasks.circle import circle_data


def test_circle_pairs_are_opposite_points_and_targets_are_one_step_on():
    data = circle_data(12, radius=0.3, n_ahead=3)
    assert data.inputs.shape == (12, 2, 2) and data.targets.shape == (12, 3, 2, 2)
    assert torch.allclose(data.inputs[:, 0], -data.inputs[:, 1], atol=1e-7)
    assert torch.allclose(data.inputs.norm(dim=-1), torch.full((12, 2), 0.3))
    for t in range(1, 4):
        step = 2 * math.pi * t / 12
        rotation = torch.tensor(
            [[math.cos(step), math.sin(step)], [-math.sin(step), math.cos(step)]]
        )
        assert torch.allclose(data.inputs @ rotation, data.targets[:, t - 1], atol=1e-6)


def test_circle_baselines_are_measured():
    data = circle_data(100, radius=0.3)
    assert data.baselines()["centre"] == pytest.approx(0.3**2 / 2, rel=1e-5)
    chord = 2 * 0.3 * math.sin(math.pi / 100)
    assert data.baselines()["stay"] == pytest.approx(chord**2 / 2, rel=1e-4)


def test_odd_circle_sizes_are_rejected():
    with pytest.raises(ConfigError, match="even and >= 4.*got 7"):
        circle_data(7)
