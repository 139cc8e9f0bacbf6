"""The fast paths never change a value: Gram or SVD route, chunked passes, thread count."""

import pytest
import torch

from rankcollapse.errors import InputError
from rankcollapse.metrics import (
    METRICS,
    _tokens,
    effective_rank,
    measure_states,
    min_sv,
    numerical_rank,
    stable_rank,
)

STATE_METRICS = [name for name, info in METRICS.items() if info.kind == "states"]


def _known_spectrum(
    n: int, d: int, ratio: float, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """X = U diag(s) V^T with orthonormal U, V and s log-spaced from 1 down to `ratio`."""
    g = torch.Generator().manual_seed(seed)
    k = min(n, d)
    u = torch.linalg.qr(torch.randn(n, k, generator=g, dtype=torch.float64))[0]
    v = torch.linalg.qr(torch.randn(d, k, generator=g, dtype=torch.float64))[0]
    s = torch.logspace(0, torch.log10(torch.tensor(ratio)).item(), k, dtype=torch.float64)
    return (u * s) @ v.mT, s


# sigma_min / sigma_max on both sides of the Gram route's limit, sqrt(GRAM_EIG_RCOND) = 3.2e-4:
# 1e-2 and 5e-4 are read from the Gram eigenvalues, 2e-4 and below from an SVD.
RATIOS = [1e-2, 5e-4, 2e-4, 1e-6, 1e-12]


@pytest.mark.parametrize("ratio", RATIOS)
@pytest.mark.parametrize(("n", "d"), [(24, 40), (40, 24)], ids=["n<d", "n>d"])
def test_spectral_metrics_match_a_known_spectrum_on_either_route(ratio, n, d):
    x, s = _known_spectrum(n, d, ratio)
    # an SVD resolves sigma_i to about eps x sigma_max; the Gram route to about 1e-8 relative
    assert min_sv(x).item() == pytest.approx(s[-1].item(), rel=max(1e-7, 1e-13 / ratio))
    assert stable_rank(x).item() == pytest.approx((s.square().sum() / s[0] ** 2).item(), rel=1e-12)
    p = s / s.sum()
    assert effective_rank(x).item() == pytest.approx(
        torch.exp(-(p * p.log()).sum()).item(), rel=1e-9
    )
    for rtol in (1e-1, 1e-3):
        assert numerical_rank(x, rtol=rtol).item() == int((s > rtol).sum())


def test_only_sequences_past_the_gram_limit_get_an_svd(monkeypatch):
    svd_batches = []
    svd = _tokens.singular_values_of
    monkeypatch.setattr(
        _tokens, "singular_values_of", lambda x: svd_batches.append(len(x)) or svd(x)
    )
    x = torch.stack([_known_spectrum(24, 40, ratio)[0] for ratio in RATIOS])
    min_sv(x)
    assert svd_batches == [3]  # 2e-4, 1e-6 and 1e-12, in one batched call
    min_sv(x[:2])
    assert svd_batches == [3]


@pytest.mark.parametrize(("n", "d"), [(24, 40), (40, 24)], ids=["n<d", "n>d"])
def test_svd_of_the_tall_orientation_equals_the_svd_of_x(n, d):
    x, _ = _known_spectrum(n, d, 1e-9, seed=3)
    x = torch.stack([x, x.flip(0)])
    expected = torch.linalg.svdvals(x)
    assert torch.allclose(_tokens.singular_values_of(x), expected, rtol=0, atol=1e-14)


def test_nearly_collapsed_and_spread_sequences_of_one_padded_batch_read_as_alone():
    # three routes in one batch: spread (Gram), nearly collapsed (SVD), padded and collapsed
    g = torch.Generator().manual_seed(4)
    token = torch.randn(1, 30, generator=g, dtype=torch.float64)
    spread = torch.randn(12, 30, generator=g, dtype=torch.float64)
    collapsed = token + 1e-9 * torch.randn(12, 30, generator=g, dtype=torch.float64)
    x = torch.stack([spread, collapsed, collapsed.flip(0)])
    mask = torch.ones(3, 12, dtype=torch.bool)
    mask[2, 7:] = False
    x[2, 7:] = float("nan")
    batch = measure_states(x, mask)
    # centring a state collapsed to 1e-9 keeps about 7 digits whatever the route: abs=1e-14
    for b in range(3):
        alone = measure_states(x[b][mask[b]])
        for name in STATE_METRICS:
            assert batch[name].value[b].item() == pytest.approx(
                alone[name].value.item(), rel=1e-12, abs=1e-14
            ), (b, name)


def test_chunked_passes_equal_one_pass_over_the_batch(monkeypatch):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, 3, 9, 5, generator=g, dtype=torch.float64) + 3.0
    mask = torch.ones(2, 3, 9, dtype=torch.bool)
    mask[0, 1, 4:] = False
    one_pass = measure_states(x, mask)
    monkeypatch.setattr(_tokens, "CHUNK_BYTES", 1)  # every sequence its own chunk
    chunked = measure_states(x, mask)
    for name in STATE_METRICS:
        assert torch.allclose(chunked[name].value, one_pass[name].value, rtol=1e-13, atol=0), name


@pytest.mark.parametrize("call", [min_sv, lambda x: measure_states(x)], ids=["min_sv", "suite"])
def test_metrics_run_on_one_thread_and_restore_the_thread_count(call, monkeypatch, rng):
    seen = []
    eigvalsh = torch.linalg.eigvalsh
    monkeypatch.setattr(
        torch.linalg, "eigvalsh", lambda a: seen.append(torch.get_num_threads()) or eigvalsh(a)
    )
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        call(torch.randn(3, 6, 4, generator=rng))
        assert seen and set(seen) == {1}
        assert torch.get_num_threads() == 2
        with pytest.raises(InputError, match="NaN"):
            call(torch.full((3, 6, 4), float("nan")))
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_small_batches_stay_whole_and_large_ones_are_split():
    assert len(_tokens.split_runs(torch.zeros(4, 8, 8), None, 2)) == 1
    runs = _tokens.split_runs(torch.zeros(4, 128, 256), torch.ones(4, 128, dtype=torch.bool), 2)
    assert [tuple(x.shape) for x, _ in runs] == [(2, 128, 256)] * 2


@pytest.mark.parametrize("threads", [2, 3, 7])
def test_a_suite_split_over_threads_equals_the_suite_on_one_thread(threads, monkeypatch):
    monkeypatch.setattr(_tokens, "MIN_RUN_ELEMENTS", 1)
    g = torch.Generator().manual_seed(8)
    x = torch.randn(2, 5, 9, 6, generator=g, dtype=torch.float64)
    x[0, 1] = x[0, 1, :1] + 1e-9 * x[0, 1]  # nearly collapsed: the explicit routes
    mask = torch.ones(2, 5, 9, dtype=torch.bool)
    mask[1, 2, 6:] = False
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        alone = measure_states(x, mask)
        torch.set_num_threads(threads)
        split = measure_states(x, mask)
        assert torch.get_num_threads() == threads
    finally:
        torch.set_num_threads(before)
    for name in STATE_METRICS:
        assert split[name].value.shape == (2, 5)
        assert torch.allclose(split[name].value, alone[name].value, rtol=1e-13, atol=0), name
        assert torch.equal(split[name].at_floor, alone[name].at_floor), name


@pytest.mark.parametrize("sample", [0, 5])  # the calling thread's run, the pool's run
def test_errors_of_a_split_suite_name_the_sample_in_the_whole_batch(sample, monkeypatch, rng):
    monkeypatch.setattr(_tokens, "MIN_RUN_ELEMENTS", 1)
    x = torch.randn(6, 5, 4, generator=rng)
    x[sample, 2, 1] = float("nan")
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        with pytest.raises(InputError, match=rf"first: sample {sample}, token 2"):
            measure_states(x)
    finally:
        torch.set_num_threads(before)


def test_a_nan_met_in_a_later_chunk_names_its_sample_in_the_whole_batch(monkeypatch, rng):
    monkeypatch.setattr(_tokens, "CHUNK_BYTES", 1)  # every sequence its own chunk
    x = torch.randn(4, 5, 3, generator=rng)
    mask = torch.ones(4, 5, dtype=torch.bool)
    mask[1, 3:] = False
    x[1, 4, 0] = float("nan")  # in a pad: never read
    assert torch.isfinite(measure_states(x, mask)["mu"].value).all()
    x[3, 1, 2] = float("inf")
    with pytest.raises(InputError, match=r"first: sample 3, token 1"):
        measure_states(x, mask)


def test_only_the_chunk_out_of_range_is_rescaled(monkeypatch):
    monkeypatch.setattr(_tokens, "CHUNK_BYTES", 1)
    g = torch.Generator().manual_seed(9)
    x = torch.randn(3, 6, 4, generator=g, dtype=torch.float64)
    huge = x.clone()
    huge[1] *= 2.0**900  # squares overflow float64: this sequence alone is divided by 2^k
    t = _tokens.Tokens(huge, reads=("norms", "gram"))
    assert t.scale[0] == 1 and t.scale[2] == 1 and t.scale[1] > 1
    plain = measure_states(x)
    scaled = measure_states(huge)
    for name in ("mu_rel", "rank1_rel", "stable_rank", "effective_rank", "cos_mean"):
        assert torch.allclose(scaled[name].value, plain[name].value, rtol=1e-13, atol=0), name
