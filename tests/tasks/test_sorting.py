import pytest
import torch

from rankcollapse.errors import ConfigError
from rankcollapse.tasks.sorting import sorting_data


def test_sorting_targets_are_the_sorted_inputs():
    data = sorting_data(50, seed=3)
    assert data.inputs.shape == (50, 8) and data.n_classes == 10
    for seq, target in zip(data.inputs.tolist(), data.targets.tolist(), strict=True):
        assert target == sorted(seq)
    assert data.inputs.min() >= 0 and data.inputs.max() <= 9


def test_sorting_is_deterministic_by_seed():
    assert torch.equal(sorting_data(5, seed=1).inputs, sorting_data(5, seed=1).inputs)
    assert not torch.equal(sorting_data(5, seed=1).inputs, sorting_data(5, seed=2).inputs)


def test_sorting_baselines_are_measured_on_the_targets():
    data = sorting_data(2000, seed=0)
    baselines = data.baselines(seed=0)
    counts = torch.bincount(data.targets.reshape(-1), minlength=10).double()
    assert baselines["majority"] == pytest.approx(float(counts.max() / counts.sum()))
    assert baselines["random"] == pytest.approx(0.1, abs=0.01)


def test_bad_sorting_sizes_are_rejected():
    with pytest.raises(ConfigError, match="n_tokens must be >= 2, got 1"):
        sorting_data(5, seed=0, n_tokens=1)
