import itertools

import pytest
import torch

from rankcollapse.errors import ConfigError
from rankcollapse.nets import NetConfig, ToyNet, random_tokens
from rankcollapse.paths import (
    SKIP,
    count_enumerated,
    decompose_by_length,
    enumerate_paths,
    path_matrices,
)
from rankcollapse.paths.toy import freeze_toy


def _net(**options) -> ToyNet:
    net = ToyNet(NetConfig(n_layers=3, n_heads=2, d_model=8, seed=1, **options))
    with torch.no_grad():  # non-zero biases and gains, so every constant term is exercised
        generator = torch.Generator().manual_seed(2)
        for p in net.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=generator, dtype=p.dtype))
    return net


def _relative_error(a, b):
    return float((a - b).abs().max() / b.abs().max())


VARIANTS = [
    {
        "skip": skip,
        "norm": norm,
        "norm_kind": kind,
        "mlp": mlp,
        "bias": True,
        "activation": "gelu",
        "skip_scale": 0.7,
    }
    for skip, norm, kind, mlp in itertools.product(
        ["off", "on", "scaled"], ["none", "pre", "post"], ["layernorm", "unit"], [False, True]
    )
    if not (norm == "none" and kind == "unit")
]


@pytest.mark.parametrize(
    "options",
    VARIANTS,
    ids=lambda o: "-".join(f"{o['skip']}/{o['norm']}/{o['norm_kind']}/mlp={o['mlp']}".split()),
)
def test_enumeration_and_per_length_sums_equal_the_output(options):
    net = _net(**options)
    x = random_tokens(2, 5, 8, seed=0)
    with torch.no_grad():
        output = net(x).output
    frozen = freeze_toy(net, x)
    by_length = decompose_by_length(frozen)
    enumerated = enumerate_paths(frozen)
    assert _relative_error(by_length.output, output) < 1e-13
    assert _relative_error(enumerated.output, output) < 1e-13
    totals = torch.stack([enumerated.terms[enumerated.lengths == k].sum(0) for k in range(4)])
    assert _relative_error(totals, by_length.components) < 1e-12
    assert _relative_error(enumerated.bias, by_length.bias) < 1e-12


def test_each_enumerated_term_is_p_path_x_w_path():
    net = _net(skip="on")
    x = random_tokens(1, 4, 8, seed=3)
    frozen = freeze_toy(net, x)
    enumerated = enumerate_paths(frozen)
    assert len(enumerated.paths) == 27
    for i in [0, 5, 13, 26]:
        p_path, w_path = path_matrices(frozen, enumerated.paths[i])
        assert torch.allclose(enumerated.terms[i], p_path @ x @ w_path, rtol=1e-12, atol=1e-14)


def test_pure_san_bias_term_is_row_constant_and_short_lengths_are_empty():
    net = _net(skip="off", bias=True)
    frozen = freeze_toy(net, random_tokens(2, 6, 8, seed=0))
    result = decompose_by_length(frozen)
    assert result.components.shape[0] == 4
    assert result.components[:3].abs().max() == 0
    assert torch.allclose(result.bias, result.bias[:, :1].expand_as(result.bias), atol=1e-14)


def test_skip_network_length_zero_component_is_the_input():
    net = _net(skip="scaled", skip_scale=0.5)
    x = random_tokens(1, 4, 8, seed=0)
    result = decompose_by_length(freeze_toy(net, x))
    assert torch.allclose(result.components[0], 0.5**3 * x, rtol=1e-14)


def test_enumeration_of_too_many_paths_points_to_the_per_length_method():
    net = ToyNet(NetConfig(n_layers=6, n_heads=3, d_model=6, skip="on"))
    frozen = freeze_toy(net, random_tokens(1, 3, 6, seed=0))
    assert count_enumerated(frozen) == 4**6
    with pytest.raises(ConfigError, match=r"4,096 paths.*max_paths = 1,000.*decompose_by_length"):
        enumerate_paths(frozen, max_paths=1000)


def test_path_matrices_refuse_a_path_of_the_wrong_length():
    frozen = freeze_toy(_net(skip="on"), random_tokens(1, 4, 8, seed=0))
    with pytest.raises(ConfigError, match="has 2 steps but the network has 3 sublayers"):
        path_matrices(frozen, (0, SKIP))


def test_path_matrices_refuse_a_skip_where_there_is_none():
    frozen = freeze_toy(_net(skip="off"), random_tokens(1, 4, 8, seed=0))
    with pytest.raises(ConfigError, match="takes the skip at a layer without one"):
        path_matrices(frozen, (0, SKIP, 1))
