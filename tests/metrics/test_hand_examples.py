"""Every metric on examples computed by hand: 2 x 3 (n <= d), 3 x 2 (n > d), 2 x 2 attention."""

import math

import pytest
import torch

from rankcollapse.metrics import (
    abs_cos_mean,
    attn_dist_uniform,
    attn_entropy,
    attn_min_edge,
    cos_mean,
    effective_rank,
    min_sv,
    min_sv_rel,
    mu,
    mu_rel,
    numerical_rank,
    rank1_rel,
    res_comp,
    res_comp_rel,
    stable_rank,
)

# Tokens (1, 0, 2) and (3, 0, 0): mean (2, 0, 1), centred rows +-(-1, 0, 1).
# X X^T = [[5, 3], [3, 9]]: sigma^2 = 7 +- sqrt(13). ||X||_F^2 = 14.
X_2X3 = torch.tensor([[1.0, 0.0, 2.0], [3.0, 0.0, 0.0]])
S1_2X3, S2_2X3 = math.sqrt(7 + math.sqrt(13)), math.sqrt(7 - math.sqrt(13))

# Tokens (1, 0), (0, 1), (-1, 0): mean (0, 1/3). X^T X = diag(2, 1): sigma = sqrt(2), 1.
X_3X2 = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])


def _erank(*sv: float) -> float:
    p = [s / sum(sv) for s in sv]
    return math.exp(-sum(q * math.log(q) for q in p))


CASES = [
    # metric, x, expected value worked out by hand
    (res_comp, X_2X3, 2.0),  # ||C||_1 = max(2, 0, 2), ||C||_inf = max(2, 2)
    (res_comp_rel, X_2X3, 2.0 / math.sqrt(4 * 3)),  # ||X||_1 = 4, ||X||_inf = 3
    (mu, X_2X3, 2.0),
    (mu_rel, X_2X3, 2.0 / math.sqrt(14)),
    (rank1_rel, X_2X3, S2_2X3 / math.sqrt(14)),
    (cos_mean, X_2X3, 3 / (math.sqrt(5) * 3)),
    (abs_cos_mean, X_2X3, 3 / (math.sqrt(5) * 3)),
    (stable_rank, X_2X3, 14 / (7 + math.sqrt(13))),
    (effective_rank, X_2X3, _erank(S1_2X3, S2_2X3)),
    (numerical_rank, X_2X3, 2.0),
    (min_sv, X_2X3, S2_2X3),
    (min_sv_rel, X_2X3, S2_2X3 / S1_2X3),
    (res_comp, X_3X2, math.sqrt(2 * 4 / 3)),  # ||C||_1 = max(2, 4/3), ||C||_inf = 4/3
    (res_comp_rel, X_3X2, math.sqrt(2 * 4 / 3) / math.sqrt(2 * 1)),
    (mu, X_3X2, math.sqrt(8 / 3)),
    (mu_rel, X_3X2, math.sqrt(8 / 9)),
    (rank1_rel, X_3X2, 1 / math.sqrt(3)),
    (cos_mean, X_3X2, -1 / 3),  # pair cosines 0, -1, 0
    (abs_cos_mean, X_3X2, 1 / 3),
    (stable_rank, X_3X2, 3 / 2),
    (effective_rank, X_3X2, _erank(math.sqrt(2), 1.0)),
    (numerical_rank, X_3X2, 2.0),
    (min_sv, X_3X2, 1.0),
    (min_sv_rel, X_3X2, 1 / math.sqrt(2)),
]


@pytest.mark.parametrize(
    ("metric", "x", "expected"),
    CASES,
    ids=[f"{m.__name__}-{'2x3' if x.shape[0] == 2 else '3x2'}" for m, x, _ in CASES],
)
def test_state_metric_matches_hand_computed_value(metric, x, expected):
    value = metric(x)
    assert value.dtype == torch.float64 and value.shape == ()
    assert value.item() == pytest.approx(expected, rel=1e-12)


def test_state_metrics_cover_every_registered_state_metric():
    from rankcollapse.metrics import METRICS

    states = {name for name, info in METRICS.items() if info.kind == "states"}
    assert states == {metric.__name__ for metric, _, _ in CASES}


# Rows (1, 0) and (1/4, 3/4).
A_2X2 = torch.tensor([[1.0, 0.0], [0.25, 0.75]])
CAUSAL = torch.tensor([[True, False], [True, True]])
H_ROW2 = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))


@pytest.mark.parametrize(
    ("metric", "edges", "expected"),
    [
        (attn_entropy, None, H_ROW2 / 2),
        (attn_entropy, CAUSAL, H_ROW2 / 2),
        (attn_min_edge, None, 0.0),
        (attn_min_edge, CAUSAL, 0.25),
        (attn_dist_uniform, None, (0.5 + 0.25) / 2),  # TV to (1/2, 1/2) per row
        (attn_dist_uniform, CAUSAL, (0.0 + 0.25) / 2),  # row 0 is uniform over its one key
    ],
)
def test_attention_metric_matches_hand_computed_value(metric, edges, expected):
    value = metric(A_2X2, edges=edges)
    assert value.dtype == torch.float64
    assert value.item() == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_disallowed_weight_counts_fully_in_dist_uniform():
    a = torch.tensor([[0.5, 0.5], [0.0, 1.0]])  # row 0 puts 1/2 on a key it may not see
    assert attn_dist_uniform(a, edges=CAUSAL).item() == pytest.approx((0.5 + 0.5) / 2)


def test_rank1_rel_is_never_larger_than_mu_rel():
    x = torch.randn(6, 5, 4, generator=torch.Generator().manual_seed(3)) + 2.0
    assert bool((rank1_rel(x) <= mu_rel(x) + 1e-15).all())
    parallel = torch.tensor([[1.0, 2.0], [3.0, 6.0]])  # parallel tokens of different length
    assert rank1_rel(parallel).item() == pytest.approx(0.0, abs=1e-15)
    assert mu_rel(parallel).item() == pytest.approx(math.sqrt(10 / 50))  # centred +-(1, 2)
