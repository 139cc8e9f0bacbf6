"""The numerics traps of the shared-Gram route, pinned against float64 SVD."""

import pytest
import torch

from rankcollapse.metrics import (
    effective_rank,
    measure_states,
    min_sv,
    numerical_rank,
    rank1_rel,
    stable_rank,
)


def _rank1_plus_noise(n: int, d: int, noise: float, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(n, 1, generator=g, dtype=torch.float64)
    v = torch.randn(1, d, generator=g, dtype=torch.float64)
    return u @ v + noise * torch.randn(n, d, generator=g, dtype=torch.float64)


def _svd_rank1_rel(x: torch.Tensor) -> float:
    s = torch.linalg.svdvals(x)
    return (s[1:].square().sum().sqrt() / s.square().sum().sqrt()).item()


@pytest.mark.parametrize(("n", "d"), [(64, 32), (32, 64)], ids=["n>d", "n<d"])
def test_rank1_rel_resolves_a_nearly_rank_1_state(n, d):
    x = _rank1_plus_noise(n, d, 1e-9)
    value = rank1_rel(x).item()
    assert 1e-10 < value < 1e-8  # not cancellation garbage (~1e-8) and not 0
    assert value == pytest.approx(_svd_rank1_rel(x), rel=1e-6)


@pytest.mark.parametrize(("n", "d"), [(64, 32), (32, 64)], ids=["n>d", "n<d"])
@pytest.mark.parametrize("noise", [1e-9, 1e-4, 1.0])
def test_spectral_metrics_match_float64_svd(n, d, noise):
    x = _rank1_plus_noise(n, d, noise)
    s = torch.linalg.svdvals(x)
    assert min_sv(x).item() == pytest.approx(s[-1].item(), rel=1e-7)
    assert stable_rank(x).item() == pytest.approx((s.square().sum() / s[0] ** 2).item(), rel=1e-10)
    p = s / s.sum()
    expected_erank = torch.exp(-(p * p.log()).sum()).item()
    assert effective_rank(x).item() == pytest.approx(expected_erank, rel=1e-10)
    for rtol in (1e-12, 1e-6, 1e-2):
        expected = int((s > rtol * s[0]).sum())
        assert numerical_rank(x, rtol=rtol).item() == expected


def test_min_sv_of_a_well_conditioned_state_matches_svd():
    x = torch.randn(8, 20, 40, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    assert torch.allclose(min_sv(x), torch.linalg.svdvals(x)[..., -1], rtol=1e-9)


def test_numerical_rank_default_counts_above_the_dtype_floor():
    x = _rank1_plus_noise(16, 8, 1e-9)
    assert numerical_rank(x).item() == 8  # float64 resolves the 1e-9 directions
    assert numerical_rank(x.float()).item() == 1  # float32 rounding is larger than them


def test_exactly_rank_deficient_state_has_zero_min_sv():
    x = _rank1_plus_noise(10, 6, 0.0)
    assert min_sv(x).item() < 1e-14 * x.norm().item()
    assert numerical_rank(x).item() == 1


def test_suite_precision_matches_single_functions_on_a_mixed_batch():
    # one collapsed and one spread sequence in the same batch take different routes
    x = torch.stack([_rank1_plus_noise(32, 16, 1e-9), _rank1_plus_noise(32, 16, 1.0, seed=1)])
    out = measure_states(x, metrics=["rank1_rel", "min_sv"])
    for b in range(2):
        assert out["rank1_rel"].value[b].item() == pytest.approx(_svd_rank1_rel(x[b]), rel=1e-6)
        svd_min = torch.linalg.svdvals(x[b])[-1].item()
        assert out["min_sv"].value[b].item() == pytest.approx(svd_min, rel=1e-7)
