import math

import numpy as np
import pytest
import torch

from rankcollapse.masks import causal, causal_window, complete, window
from rankcollapse.theory import (
    bound_curve,
    fitted_rate,
    mask_graph,
    min_allowed_weight,
    rate_no_norm,
    rate_unit_norm,
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


def test_bound_curve_starts_at_mu0():
    assert bound_curve(5.0, -1.0, 3)[0] == 5.0
