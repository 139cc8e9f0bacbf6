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


def _net(**options):
    from rankcollapse.nets import NetConfig, ToyNet

    base = {
        "n_layers": 3,
        "n_heads": 2,
        "d_model": 6,
        "skip": "on",
        "norm": "post",
        "bias": True,
        "seed": 1,
    }
    return ToyNet(NetConfig(**{**base, **options}))


def _x(b=4, n=5, d=6):
    return torch.randn(b, n, d, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


def test_restricted_forward_with_every_layer_whole_equals_the_full_model():
    from torch.nn.functional import layer_norm

    from rankcollapse.paths.sampling import FULL, path_restricted_forward

    for options in ({}, {"norm": "pre"}, {"norm": "none", "mask": "causal"}):
        net, x = _net(**options), _x()
        routes = torch.full((1, 3), FULL)
        full = net(x).output
        assert torch.equal(path_restricted_forward(net, x, routes, normalise=False), full)
        normalised = path_restricted_forward(net, x, routes)
        assert torch.allclose(normalised, layer_norm(full, (6,)), atol=1e-12)


def test_one_layer_routes_add_up_to_the_layer_without_norms():
    from rankcollapse.paths.sampling import path_restricted_forward

    net, x = _net(n_layers=1, norm="none", bias=False), _x()
    every_branch = torch.tensor([[SKIP], [0], [1]])
    total = path_restricted_forward(net, x, every_branch, normalise=False)
    assert torch.allclose(total, net(x).output, atol=1e-12)


def test_a_head_step_is_the_head_alone_then_a_plain_layer_norm():
    from torch.nn.functional import layer_norm

    from rankcollapse.paths.sampling import path_restricted_forward

    net, x = _net(n_layers=2), _x()
    with torch.no_grad():
        for p in net.parameters():
            if p.ndim <= 2:  # give the biases non-zero values
                p.add_(0.1)
    attn = net.layers[1].attn
    p_on_x = attn.attention(x)[:, 1]  # layer 1 skipped: head 1 of layer 2 sees x itself
    b_1 = attn.b_v[1] @ attn.w_o[1] + attn.b_o
    head_step = layer_norm(p_on_x @ x @ attn.head_matrices()[1] + b_1, (6,))
    by_hand = layer_norm(head_step, (6,))  # the final normalisation of the one-route sum
    restricted = path_restricted_forward(net, x, torch.tensor([[SKIP, 1]]))
    assert torch.allclose(restricted, by_hand, atol=1e-12)


def test_grouped_routes_give_one_sum_per_group():
    from rankcollapse.paths.sampling import path_restricted_forward

    net, x = _net(), _x()
    routes = sample_paths(3, 2, 2, 4, seed=0, n_repeats=3)
    grouped = path_restricted_forward(net, x, routes)
    assert grouped.shape == (3, 4, 5, 6)
    for g in range(3):
        assert torch.allclose(grouped[g], path_restricted_forward(net, x, routes[g]), atol=1e-12)


def test_bad_routes_get_clear_errors():
    from rankcollapse.errors import InputError
    from rankcollapse.paths.sampling import path_restricted_forward

    net, x = _net(), _x()
    with pytest.raises(InputError, match="route entry 2 is not allowed.*0..1"):
        path_restricted_forward(net, x, torch.tensor([[0, 2, SKIP]]))
    with pytest.raises(InputError, match="network has 3 layers"):
        path_restricted_forward(net, x, torch.tensor([[0, 1]]))
    with pytest.raises(ConfigError, match="without MLP blocks"):
        path_restricted_forward(_net(mlp=True), x, torch.tensor([[0, 1, 1]]))


def test_a_generator_seed_draws_consecutive_independent_samples():
    generator = torch.Generator().manual_seed(3)
    first = sample_paths(5, 2, 2, 4, seed=generator, n_repeats=2)
    second = sample_paths(5, 2, 2, 4, seed=generator, n_repeats=2)
    assert torch.equal(first, sample_paths(5, 2, 2, 4, seed=3, n_repeats=2))
    assert not torch.equal(first, second)
