import math

import pytest
import torch

from rankcollapse.errors import ConfigError
from rankcollapse.tasks.circle import circle_data


def test_circle_pairs_hold_one_point_of_each_arc_and_targets_are_one_step_on():
    data = circle_data(12, radius=0.3)  # arcs of m = 5 steps: p_0..p_5 and p_5..p_10
    assert data.inputs.shape == (5, 2, 2) and data.targets.shape == (5, 2, 2)
    assert torch.allclose(data.inputs.norm(dim=-1), torch.full((5, 2), 0.3))
    assert torch.allclose(data.inputs[0], torch.tensor([[0.3, 0.0], [-0.3 * 0.866025, 0.15]]))
    step = 2 * math.pi / 12
    rotation = torch.tensor([[math.cos(step), math.sin(step)], [-math.sin(step), math.cos(step)]])
    assert torch.allclose(data.inputs @ rotation, data.targets, atol=1e-6)
    assert torch.allclose(data.targets[:-1], data.inputs[1:])  # teacher forcing: next = true


def test_circle_baselines_are_measured():
    data = circle_data(100, radius=0.3)
    assert data.baselines()["centre"] == pytest.approx(0.3**2 / 2, rel=1e-5)
    chord = 2 * 0.3 * math.sin(math.pi / 100)
    assert data.baselines()["stay"] == pytest.approx(chord**2 / 2, rel=1e-4)


def test_odd_circle_sizes_are_rejected():
    with pytest.raises(ConfigError, match="even and >= 6.*got 7"):
        circle_data(7)
