import itertools
import math

import pytest
import torch
from scipy.stats import chisquare

from rankcollapse.errors import ConfigError
from rankcollapse.paths.sampling import SKIP, n_paths_of_length, sample_paths


@pytest.mark.parametrize("length", [0, 1, 2, 3])
def test_sampled_paths_are_uniform_over_the_paths_of_their_length(length):
    n_layers, n_heads, n_draws = 3, 2, 4000
    routes = sample_paths(n_layers, n_heads, length, n_draws, seed=length).reshape(n_draws, -1)
    every_path = [
        route
        for route in itertools.product([SKIP, *range(n_heads)], repeat=n_layers)
        if sum(entry != SKIP for entry in route) == length
    ]
    assert len(every_path) == n_paths_of_length(n_layers, n_heads, length)
    index = {route: i for i, route in enumerate(every_path)}
    counts = torch.zeros(len(every_path))
    for route in routes.tolist():
        counts[index[tuple(route)]] += 1  # KeyError if a route had the wrong length
    if len(every_path) > 1:
        assert chisquare(counts.numpy()).pvalue > 1e-3


def test_path_counts_are_binomial_times_heads_to_the_length():
    assert [n_paths_of_length(6, 2, k) for k in range(7)] == [
        math.comb(6, k) * 2**k for k in range(7)
    ]
    assert sum(n_paths_of_length(12, 12, k) for k in range(13)) == 13**12


def test_sampling_is_deterministic_by_seed_and_repeats_differ():
    a = sample_paths(6, 3, 2, 20, seed=4, n_repeats=3)
    assert torch.equal(a, sample_paths(6, 3, 2, 20, seed=4, n_repeats=3))
    assert a.shape == (3, 20, 6)
    assert not torch.equal(a[0], a[1])


def test_bad_path_requests_get_clear_errors():
    with pytest.raises(ConfigError, match="n_paths must be >= 1, got 0"):
        sample_paths(6, 2, 1, 0, seed=0)
    with pytest.raises(ConfigError, match="k=7 is not possible.*6 layers.*0..6"):
        sample_paths(6, 2, 7, 5, seed=0)
    with pytest.raises(ConfigError, match="k=-1"):
        sample_paths(6, 2, -1, 5, seed=0)
