import math

import numpy as np
import pytest
import torch

from rankcollapse.errors import InputError
from rankcollapse.masks import causal, causal_window, complete, parse_mask_spec, window
from rankcollapse.theory import (
    fitted_rate,
    layer_eps,
    mask_graph,
    mask_radius,
    min_allowed_weight,
    radius_concordance,
    rate_no_norm,
    rate_unit_norm,
    speed_ratio,
    thm1_log_bound,
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


def test_thm1_bound_uses_the_smallest_eps_up_to_each_layer_for_every_block():
    eps = np.array([0.5, 0.2, 0.4, 0.4, 0.9])
    log_b = thm1_log_bound(eps, 2, 10)  # N = 10: C / mu(X^0) = 3
    blocks = np.array([0, 0, 1, 1, 2, 2])
    eps_t = np.array([0.0, 0.5, 0.2, 0.2, 0.2, 0.2])  # eps_0 unused: no block yet
    assert log_b == pytest.approx(math.log(3) + blocks * np.log1p(-(eps_t**2)))


def test_thm1_bound_with_constant_eps_has_thm1s_rate():
    log_b = thm1_log_bound(np.full(12, 0.3), 3, 2)
    assert (log_b[12] - log_b[0]) / 12 == pytest.approx(rate_no_norm(0.3, 3))


def test_thm1_bound_scales_with_the_largest_value_map_product_so_far():
    norms = np.array([1.0, 2.0, 0.5, 3.0])
    log_b = thm1_log_bound(np.full(3, 0.5), 1, 2, norms)
    assert np.exp(log_b) == pytest.approx([1.0, 2 * 0.5, 2 * 0.25, 3 * 0.125])
    with pytest.raises(InputError, match="one per layer"):
        thm1_log_bound(np.full(3, 0.5), 1, 2, norms[:3])


def test_thm1_bound_holds_on_a_masked_san_with_any_value_maps():
    # the derivation, checked on X^{t+1} = A^t X^t W^t with random stochastic A^t under the
    # causal mask (r = 1) and Gaussian W^t that amplify: mu_t <= B_t at every layer
    gen = np.random.default_rng(0)
    n, d, depth = 5, 4, 10
    m = causal(n).numpy()
    x = gen.normal(size=(n, d))
    mu = [np.linalg.norm(x - x.mean(0))]
    eps, norms, product = [], [1.0], np.eye(d)
    for _ in range(depth):
        a = np.where(m, gen.uniform(0.2, 1.0, size=(n, n)), 0.0)
        a /= a.sum(1, keepdims=True)
        w = gen.normal(size=(d, d))
        x, product = a @ x @ w, product @ w
        eps.append(a[m].min())
        norms.append(np.linalg.norm(product, 2))
        mu.append(np.linalg.norm(x - x.mean(0)))
    log_b = thm1_log_bound(np.array(eps), 1, n, np.array(norms))
    assert np.all(np.log(mu) - np.log(mu[0]) <= log_b + 1e-12)


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
