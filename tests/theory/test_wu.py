import math

import numpy as np
import pytest
import torch

from rankcollapse.masks import causal, causal_window, complete, parse_mask_spec, window
from rankcollapse.theory import (
    block_log_bound,
    bound_excess,
    fitted_rate,
    layer_eps,
    mask_graph,
    mask_radius,
    min_allowed_weight,
    radius_concordance,
    rate_no_norm,
    rate_unit_norm,
    speed_ratio,
)


@pytest.mark.parametrize(
    "make, radius, n_centers",
    [
        (lambda n: complete(n), 1, 9),
        (lambda n: causal(n), 1, 1),
        (lambda n: window(n, 1), 4, 9),
        (lambda n: causal_window(n, 1), 8, 1),
    ],
)
def test_mask_graph_radius_and_centers_for_nine_tokens(make, radius, n_centers):
    graph = mask_graph(make(9))
    assert (graph.radius, graph.n_centers) == (radius, n_centers)


def test_eps_is_the_smallest_weight_on_allowed_edges_only():
    a = torch.tensor([[1.0, 0.0, 0.0], [0.1, 0.9, 0.0], [0.3, 0.3, 0.4]])
    assert min_allowed_weight([a, a + 0.05 * causal(3)], causal(3)) == pytest.approx(0.1)


def test_rates_flatten_with_radius_and_with_small_eps():
    assert rate_no_norm(0.2, 4) > rate_no_norm(0.2, 1)
    assert rate_no_norm(0.01, 1) > rate_no_norm(0.2, 1)
    assert rate_unit_norm(0.3, 2, 1) > rate_unit_norm(0.3, 2, 5)


def test_fitted_rate_recovers_an_exponential_and_ignores_floor_values():
    mu = 3.0 * np.exp(-0.4 * np.arange(10))
    mu[7:] = 1e-300
    assert fitted_rate(mu, floor=1e-200) == pytest.approx(-0.4)
    assert math.isnan(fitted_rate(np.array([1.0, 0.0]), floor=0.0))


def test_block_bound_uses_the_smallest_eps_of_each_complete_block_of_r_layers():
    eps = np.array([0.5, 0.2, 0.4, 0.4, 0.9])
    log_b = block_log_bound(eps, 2)
    expected = [0, 0, math.log(1 - 0.2**2), math.log(1 - 0.2**2), np.nan, np.nan]
    expected[4] = expected[5] = expected[2] + math.log(1 - 0.4**2)  # layer 5 is in no block
    assert log_b == pytest.approx(expected)


def test_bound_with_constant_eps_is_thm1s_rate():
    log_b = block_log_bound(np.full(12, 0.3), 3)
    assert log_b[12] / 12 == pytest.approx(rate_no_norm(0.3, 3))


def test_bound_excess_fits_c_on_the_first_r_layers_and_tests_only_later_ones():
    log_b = np.log([1.0, 1.0, 0.5, 0.5, 0.25])  # r = 2, factor 1/2 per block
    # the first r + 1 layers set C = 2 (layer 2: mu 1 against B 0.5); layer 3 at C B = 1
    assert bound_excess(np.log([1.0, 1.5, 1.0, 1.0]), log_b, 2) == pytest.approx(0.0)
    assert bound_excess(np.log([1.0, 1.5, 1.0, 2.0]), log_b, 2) == pytest.approx(math.log(2))
    assert math.isnan(bound_excess(np.log([1.0, 1.5, 1.0]), log_b, 2))


def test_layer_eps_is_per_layer_over_allowed_edges():
    a = torch.tensor([[[1.0, 0.0], [0.3, 0.7]], [[1.0, 0.0], [0.1, 0.9]]])  # two samples
    assert layer_eps([a, torch.eye(2)[None] * 0.5 + 0.25], causal(2)) == pytest.approx([0.1, 0.25])


def test_speed_ratio_only_between_two_collapse_rates():
    assert speed_ratio(-1.0, -0.25) == (4.0, "")
    for fast, slow in ((-1.0, 0.0), (0.2, 0.1), (math.nan, -1.0)):
        ratio, reason = speed_ratio(fast, slow)
        assert math.isnan(ratio) and "not both collapse rates" in reason


def test_mask_radius_matches_the_graph_and_is_infinite_without_a_center():
    assert mask_radius(parse_mask_spec("window:1"), 16) == math.ceil(15 / 2)
    assert mask_radius(parse_mask_spec("causal_window:1"), 16) == 15
    assert mask_radius(parse_mask_spec("complete"), 16) == 1
    assert mask_radius(parse_mask_spec("dilated:1:2"), 16) == math.inf


def test_radius_concordance_counts_pairs_of_different_radius_and_nan_poisons():
    assert radius_concordance([1, 1, 2], [-3.0, -1.0, -2.0]) == 0.5
    assert math.isnan(radius_concordance([1, 1], [-1.0, -2.0]))
    assert math.isnan(radius_concordance([1, 2], [-1.0, math.nan]))
