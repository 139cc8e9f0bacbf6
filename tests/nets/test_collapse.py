"""Dong et al. 2021 on the toy network: pure attention loses rank doubly exponentially, the skip
connection stops it (Dong, Cordonnier, Loukas 2021, Sec. 2 and 4)."""

import functools
import itertools

import pytest
import torch

from rankcollapse.metrics import res_comp_rel
from rankcollapse.nets import NetConfig, ToyNet, random_tokens

FLOAT64_SIGNAL = 1e-13  # well above float64's floor (~2e-16 relative): below it, ratios are noise


@functools.cache
def _residuals(seed: int, skip: str = "off") -> list[float]:
    """Mean over 8 sequences of res_comp_rel per layer (0 = input), 32 tokens of width 64."""
    net = ToyNet(NetConfig(n_layers=12, d_model=64, seed=seed, skip=skip))
    x = random_tokens(8, 32, 64, seed=100 + seed)
    with torch.no_grad():
        return [res_comp_rel(state).mean().item() for state in net(x).states]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pure_single_head_san_collapses_below_1e_10_within_five_layers(seed):
    r = _residuals(seed)
    assert r[0] > 0.5
    assert min(r[1:6]) < 1e-10


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pure_san_residual_shrinks_faster_than_geometrically(seed):
    r = _residuals(seed)
    signal = [v for v in r if v > FLOAT64_SIGNAL]
    ratios = [b / a for a, b in itertools.pairwise(signal)]
    assert len(ratios) >= 3
    assert all(later < earlier for earlier, later in itertools.pairwise(ratios)), ratios


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_skip_connections_keep_the_residual_above_0_1_at_layer_12(seed):
    assert _residuals(seed, skip="on")[12] > 0.1
