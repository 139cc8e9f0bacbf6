"""Property-based tests of the state metrics: declared invariances, searched for
counterexamples over the registry, and the Gram and SVD routes against a full SVD on random
spectra (spread, near rank 1, ill-conditioned)."""

from unittest import mock

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rankcollapse.metrics import METRICS, _tokens, measure_states

STATE_METRICS = [name for name, info in METRICS.items() if info.kind == "states"]
EXAMPLES = settings(max_examples=25, deadline=None)

# Which invariances each state metric has (every one of them is tested below).
ABSOLUTE = {"res_comp", "mu", "min_sv"}  # in the units of x: scaling x by c scales them by |c|
ENTRYWISE = {"res_comp_rel", "res_comp"}  # ||.||_{1,inf}: signed feature permutations only
SHIFT_INVARIANT = {"res_comp", "mu"}  # centred and absolute: X + 1 c^T changes nothing
INVARIANCES = {
    name: {
        "token order",
        "signed feature permutation",
        *(() if name in ENTRYWISE else ("rotation",)),
        "scale" if name not in ABSOLUTE else "scale (covariant)",
        *(("shift",) if name in SHIFT_INVARIANT else ()),
    }
    for name in STATE_METRICS
}


@st.composite
def states(draw) -> torch.Tensor:
    """(2, n, d) float64 states: Gaussian, with a large common token, or nearly rank 1."""
    n, d = draw(st.integers(2, 9)), draw(st.integers(1, 9))
    kind = draw(st.sampled_from(["gaussian", "common", "near-rank-1"]))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    x = torch.randn(2, n, d, generator=g, dtype=torch.float64)
    if kind == "common":
        x = x + 10 * torch.randn(2, 1, d, generator=g, dtype=torch.float64)
    elif kind == "near-rank-1":
        u = torch.randn(2, n, 1, generator=g, dtype=torch.float64)
        v = torch.randn(2, 1, d, generator=g, dtype=torch.float64)
        x = u @ v + draw(st.sampled_from([1e-3, 1e-6])) * x
    return x


def _assert_close(name: str, got: torch.Tensor, expected: torch.Tensor, x: torch.Tensor) -> None:
    # near rank 1 a relative metric is ~1e-6 and carries rounding of ~1e-16 x ||X||
    size = x.norm(dim=(-2, -1)) if name in ABSOLUTE else torch.ones(())
    assert torch.allclose(got, expected, rtol=1e-7, atol=0) or bool(
        ((got - expected).abs() <= 1e-10 * size).all()
    ), (name, got, expected)


def _orthogonal(d: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))[0]


@pytest.mark.parametrize("name", STATE_METRICS)
@EXAMPLES
@given(x=states(), seed=st.integers(0, 2**31))
def test_token_order_never_changes_a_metric(name, x, seed):
    assert "token order" in INVARIANCES[name]
    order = torch.randperm(x.shape[1], generator=torch.Generator().manual_seed(seed))
    _assert_close(name, METRICS[name].fn(x[:, order]), METRICS[name].fn(x), x)


@pytest.mark.parametrize("name", STATE_METRICS)
@EXAMPLES
@given(x=states(), seed=st.integers(0, 2**31))
def test_signed_feature_permutations_never_change_a_metric(name, x, seed):
    assert "signed feature permutation" in INVARIANCES[name]
    g = torch.Generator().manual_seed(seed)
    d = x.shape[-1]
    signs = torch.randint(0, 2, (d,), generator=g).to(torch.float64) * 2 - 1
    moved = x[..., torch.randperm(d, generator=g)] * signs
    _assert_close(name, METRICS[name].fn(moved), METRICS[name].fn(x), x)


@pytest.mark.parametrize("name", [n for n in STATE_METRICS if "rotation" in INVARIANCES[n]])
@EXAMPLES
@given(x=states(), seed=st.integers(0, 2**31))
def test_rotating_the_features_never_changes_a_rotation_invariant_metric(name, x, seed):
    rotated = x @ _orthogonal(x.shape[-1], seed)
    _assert_close(name, METRICS[name].fn(rotated), METRICS[name].fn(x), x)


@pytest.mark.parametrize("name", sorted(ENTRYWISE))
def test_the_composite_residuals_are_not_rotation_invariant(name):
    # the (1, inf) norm is entrywise: a generic rotation changes it (so it is not declared)
    x = torch.randn(6, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    rotated = METRICS[name].fn(x @ _orthogonal(4, 1)).item()
    assert rotated != pytest.approx(METRICS[name].fn(x).item(), rel=1e-3)


@pytest.mark.parametrize("name", STATE_METRICS)
@EXAMPLES
@given(x=states(), exponent=st.floats(-6, 6), sign=st.sampled_from([-1.0, 1.0]))
def test_scaling_leaves_relative_metrics_and_scales_absolute_ones(name, x, exponent, sign):
    c = sign * 10.0**exponent
    factor = abs(c) if "scale (covariant)" in INVARIANCES[name] else 1.0
    assert "scale" in INVARIANCES[name] or factor == abs(c)
    _assert_close(name, METRICS[name].fn(c * x), factor * METRICS[name].fn(x), factor * x)


@pytest.mark.parametrize("name", sorted(SHIFT_INVARIANT))
@EXAMPLES
@given(x=states(), seed=st.integers(0, 2**31), size=st.floats(0.0, 10.0))
def test_adding_one_vector_to_every_token_leaves_the_centred_residuals(name, x, seed, size):
    assert "shift" in INVARIANCES[name]
    g = torch.Generator().manual_seed(seed)
    shift = size * torch.randn(2, 1, x.shape[-1], generator=g, dtype=torch.float64)
    # the shift costs the centring about eps x ||shift|| per entry, absolutely
    got, expected = METRICS[name].fn(x + shift), METRICS[name].fn(x)
    slack = 1e-13 * (x.norm(dim=(-2, -1)) + shift.norm(dim=(-2, -1)) * x.shape[1] ** 0.5)
    assert bool(((got - expected).abs() <= 1e-9 * expected + slack).all())


@st.composite
def spectra(draw) -> tuple[torch.Tensor, torch.Tensor]:
    """X = U diag(s) V^T with known s: spread, near rank 1 or ill-conditioned."""
    n, d = draw(st.integers(2, 24)), draw(st.integers(2, 24))
    k = min(n, d)
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    u = torch.linalg.qr(torch.randn(n, k, generator=g, dtype=torch.float64))[0]
    v = torch.linalg.qr(torch.randn(d, k, generator=g, dtype=torch.float64))[0]
    kind = draw(st.sampled_from(["log-spaced", "near-rank-1", "random"]))
    smallest = 10.0 ** draw(st.floats(-13, 0))
    if kind == "log-spaced":  # condition number 1 / smallest
        s = torch.logspace(0, torch.log10(torch.tensor(smallest)).item(), k, dtype=torch.float64)
    elif kind == "near-rank-1":
        s = torch.cat([torch.ones(1), smallest * torch.rand(k - 1, generator=g) + smallest])
    else:
        s = torch.rand(k, generator=g, dtype=torch.float64) + smallest
    s = s.to(torch.float64).sort(descending=True).values
    return (u * s) @ v.mT, s


@settings(max_examples=50, deadline=None)
@given(case=spectra())
def test_gram_and_svd_routes_agree_with_a_full_svd(case):
    x, s = case
    svd = _tokens.singular_values_of
    with mock.patch.object(_tokens, "singular_values_of", side_effect=svd) as exact:
        out = measure_states(x, metrics=["min_sv", "stable_rank", "effective_rank", "rank1_rel"])
    ratio = (s[-1] / s[0]).item()
    # the Gram route is used only where it resolves sigma_min to about 1e-8 relative;
    # ill-conditioned spectra take a float64 SVD
    took_svd = exact.call_count > 0
    assert took_svd == (ratio**2 < _tokens.GRAM_EIG_RCOND * (1 + 1e-6)) or (
        abs(ratio**2 / _tokens.GRAM_EIG_RCOND - 1) < 1e-3
    )
    reference = torch.linalg.svdvals(x)
    tol = 1e-7 if not took_svd else max(1e-9, 1e-14 / ratio)
    assert out["min_sv"].value.item() == pytest.approx(reference[-1].item(), rel=tol)
    stable = (reference.square().sum() / reference[0] ** 2).item()
    assert out["stable_rank"].value.item() == pytest.approx(stable, rel=1e-12)
    p = reference / reference.sum()
    erank = torch.exp(-torch.special.xlogy(p, p).sum()).item()
    assert out["effective_rank"].value.item() == pytest.approx(erank, rel=1e-9)
    tail = (reference[1:].square().sum().sqrt() / reference.norm()).item()
    assert out["rank1_rel"].value.item() == pytest.approx(tail, rel=1e-6, abs=1e-15)


@settings(max_examples=50, deadline=None)
@given(case=spectra(), rtol=st.floats(1e-12, 0.5))
def test_numerical_rank_counts_the_singular_values_of_a_full_svd(case, rtol):
    x, _ = case
    reference = torch.linalg.svdvals(x)
    threshold = rtol * reference[0]
    if bool(((reference - threshold).abs() <= 1e-6 * threshold).any()):
        return  # a singular value on the threshold: either count is right
    expected = int((reference > threshold).sum())
    assert METRICS["numerical_rank"].fn(x, rtol=rtol).item() == expected


def _plain(x: torch.Tensor) -> dict[str, float]:
    """Every state metric of one (n, d) float64 sequence by its formula: sums, an SVD, no Gram."""
    n = x.shape[0]
    s = torch.linalg.svdvals(x)
    centred = x - x.mean(0)
    composite = lambda a: (a.abs().sum(0).max() * a.abs().sum(1).max()).sqrt()
    unit = x / x.norm(dim=1, keepdim=True)
    cos = unit @ unit.T
    off = ~torch.eye(n, dtype=torch.bool)
    p = s / s.sum()
    return {
        "res_comp_rel": (composite(centred) / composite(x)).item(),
        "res_comp": composite(centred).item(),
        "rank1_rel": (s[1:].norm() / s.norm()).item(),
        "mu": centred.norm().item(),
        "mu_rel": (centred.norm() / x.norm()).item(),
        "cos_mean": cos[off].mean().item(),
        "abs_cos_mean": cos[off].abs().mean().item(),
        "stable_rank": (s.square().sum() / s[0] ** 2).item(),
        "effective_rank": torch.exp(-torch.special.xlogy(p, p).sum()).item(),
        "numerical_rank": float((s > 10 * torch.finfo(torch.float64).eps * s[0]).sum()),
        "min_sv": s[-1].item(),
        "min_sv_rel": (s[-1] / s[0]).item(),
    }


@settings(max_examples=25, deadline=None)
@given(x=states(), lengths=st.tuples(st.integers(2, 9), st.integers(2, 9)))
def test_the_suite_agrees_with_the_plain_formulas_on_padded_batches(x, lengths):
    n = x.shape[1]
    mask = torch.arange(n) < torch.tensor([min(length, n) for length in lengths])[:, None]
    padded = x.masked_fill(~mask[..., None], 1e6)  # garbage in the pads must never enter
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)  # the suite splits the batch over two Python threads
        with mock.patch.object(_tokens, "MIN_RUN_ELEMENTS", 1):
            out = measure_states(padded, mask)
    finally:
        torch.set_num_threads(before)
    for b in range(2):
        plain = _plain(x[b][mask[b]])
        for name in STATE_METRICS:
            got = out[name].value[b].item()
            scale = x[b].norm().item() if name in ABSOLUTE else 1.0
            assert got == pytest.approx(plain[name], rel=1e-6, abs=1e-10 * scale), (b, name)
