"""The accelerator's route of the metric suite (`metrics._batched`), forced on the CPU.

Its values equal the float64 route's within `SPECTRA_RTOL` (relative; the O(n d) metrics within
`SUMS_RTOL`, float64 rounding, and the floor flags exactly; values at the floor are rounding
noise on either route), it reads the
device once per call, and it makes one batched eigenproblem per call on states whose Gram
spectrum it resolves.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rankcollapse.errors import InputError
from rankcollapse.metrics import DEFAULT_METRICS, measure_states
from rankcollapse.metrics._batched import SPECTRA_RTOL, SUMS_RTOL, DeviceTokens

SPECTRAL = ("stable_rank", "effective_rank", "numerical_rank", "min_sv", "min_sv_rel", "rank1_rel")


def _spectrum_states(singular: torch.Tensor, batch: int, d: int, seed: int) -> torch.Tensor:
    """float32 states (batch, k, d) with the given singular values (k,): U diag(s) V^T."""
    g = torch.Generator().manual_seed(seed)
    k = len(singular)
    u = torch.linalg.qr(torch.randn(batch, k, k, generator=g, dtype=torch.float64))[0]
    v = torch.linalg.qr(torch.randn(batch, d, k, generator=g, dtype=torch.float64))[0]
    return (u * singular @ v.mT).float()


def _cases() -> dict[str, tuple[torch.Tensor, torch.Tensor | None, torch.dtype | None]]:
    g = torch.Generator().manual_seed(0)
    pads = torch.ones(5, 24, dtype=torch.bool)
    pads[1, 20:], pads[3, 5:] = False, False
    bulk = torch.cat([torch.ones(2, dtype=torch.float64), torch.logspace(-3, -4, 30)])
    collapsed = torch.randn(3, 1, 40, generator=g) + 1e-6 * torch.randn(3, 16, 40, generator=g)
    identical = torch.randn(3, 1, 40, generator=g).expand(3, 16, 40)
    padded = torch.randn(5, 24, 32, generator=g)
    padded[3, 5:] = float("nan")  # what pads hold never enters a value
    mixed = torch.cat([torch.randn(2, 16, 40, generator=g), collapsed[:2]])
    outlier = torch.randn(3, 16, 40, generator=g)
    outlier[:, 0] *= 1e5  # one token's massive activation, as in large language models
    centres = torch.randn(3, 2, 40, generator=g)
    clusters = centres.repeat_interleave(8, 1) + 1e-4 * torch.randn(3, 16, 40, generator=g)
    offset = 1e4 * torch.randn(3, 1, 40, generator=g) + torch.randn(3, 16, 40, generator=g)
    scales = torch.tensor([1e-20, 1.0, 1e20], dtype=torch.float64).view(3, 1, 1)
    return {
        "random tokens": (torch.randn(6, 32, 48, generator=g), None, None),
        "more tokens than features": (torch.randn(4, 64, 16, generator=g), None, None),
        "pads": (torch.randn(5, 24, 32, generator=g), pads, None),
        "pads holding NaN": (padded, pads, None),
        "a bulk 1e3 to 1e4 below sigma_max": (_spectrum_states(bulk, 4, 48, 1), None, None),
        "bfloat16 source": (torch.randn(4, 16, 24, generator=g), None, torch.bfloat16),
        "collapsed": (collapsed, None, None),
        "collapsed beside random": (mixed, None, None),
        "identical tokens": (identical, None, None),
        "identical bfloat16 tokens": (identical.bfloat16(), None, None),
        "collapsed, float64 source": (collapsed.double(), None, None),
        "layers of a group": (torch.randn(3, 2, 12, 20, generator=g), None, None),
        "one token 1e5 x the others": (outlier, None, None),
        "two tight clusters": (clusters, None, None),
        "a mean 1e4 x the spread": (offset, None, None),
        "float64 states at 1e-20, 1 and 1e20": (scales * collapsed.double(), None, None),
        "float16 source": (torch.randn(4, 16, 24, generator=g), None, torch.float16),
    }


@pytest.mark.parametrize("case", list(_cases()))
def test_batched_route_equals_float64_route_within_stated_tolerance(case: str) -> None:
    x, mask, source = _cases()[case]
    exact = measure_states(x, mask, source_dtype=source)
    batched = measure_states(x, mask, source_dtype=source, batched=True)
    assert list(batched) == list(DEFAULT_METRICS)
    for name, (value, at_floor) in exact.items():
        got = batched[name]
        assert got.value.shape == value.shape and got.value.dtype == torch.float64
        assert torch.equal(got.at_floor, at_floor), name
        tolerance = SPECTRA_RTOL if name in SPECTRAL else SUMS_RTOL
        gap = (got.value - value).abs() / value.abs().clamp_min(1e-300)
        gap = gap.where(~at_floor, 0.0)  # values at the floor are noise on either route
        assert float(gap.max()) <= tolerance, (name, float(gap.max()))


def _routes(
    x: torch.Tensor, source: torch.dtype | None = None, mask: torch.Tensor | None = None
) -> tuple[dict, dict, list[int]]:
    """Both routes' values of x, and how many sequences each stage of the batched route left
    unresolved: [the Gram's] or [the Gram's, the two stages'] (`DeflatedTokens`)."""
    redone: list[int] = []
    real = DeviceTokens.to_redo

    def counted(self, source):
        redo = real(self, source)
        redone.append(int(redo.sum()))
        return redo

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(DeviceTokens, "to_redo", counted)  # DeflatedTokens inherits it
        batched = measure_states(x, mask, source_dtype=source, batched=True)
    return measure_states(x, mask, source_dtype=source), batched, redone


def _close(batched: dict, exact: dict, names=SPECTRAL) -> bool:
    """Every value not at the floor within SPECTRA_RTOL (relative) of the float64 route's."""
    for name in names:
        value, at_floor = exact[name]
        gap = (batched[name].value - value).abs() / value.abs().clamp_min(1e-300)
        if not (
            torch.equal(batched[name].at_floor, at_floor) and gap[~at_floor].le(SPECTRA_RTOL).all()
        ):
            return False
    return True


def test_sequences_the_gram_cannot_resolve_are_measured_again() -> None:
    resolved = _spectrum_states(torch.logspace(0, -4, 12, dtype=torch.float64), 2, 20, 3)
    # sigma_min / sigma_max 3e-6: above float32's floor (1.2e-6), below what the Gram resolves
    unresolved = _spectrum_states(torch.logspace(0, -5.5, 12, dtype=torch.float64), 2, 20, 4)
    exact, batched, redone = _routes(torch.cat([resolved, unresolved]))
    assert redone == [2, 0]  # the Gram leaves two; the two stages resolve them
    assert _close(batched, exact)


def _collapsed_float32(n: int, d: int) -> torch.Tensor:
    """Two float32 sequences of tokens equal up to a few units of float32 rounding (a
    collapsed layer of a float32 model: sigma_i / sigma_max about 1e-8 beside the first)."""
    g = torch.Generator().manual_seed(12)
    mean = torch.randn(2, 1, d, generator=g, dtype=torch.float64)
    return (
        mean + 3e-7 * mean.abs() * torch.randn(2, n, d, generator=g, dtype=torch.float64)
    ).float()


def test_float32_states_collapsed_to_rounding_noise_need_no_svd(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    x = _collapsed_float32(128, 192)
    exact, batched, redone = _routes(x)
    assert redone == [2, 0]  # the Gram cannot bound effective_rank; the two stages can
    assert _close(batched, exact)
    counter = _Reads(monkeypatch)
    measure_states(x, batched=True)
    assert counter.decompositions == ["eigvalsh", "eigh", "eigvalsh"]
    assert counter.reads.count("cpu") == 2


def test_values_the_two_stages_cannot_vouch_for_take_the_float64_route_exactly() -> None:
    # float64 states, a flat bulk at 1e-12 sigma_max beside two large values: above float64's
    # floor (2.2e-15), below what W's own rounding (about 1e-16 sigma_max) leaves of its
    # singular values to 1e-4 (min_sv's bound: the Gram resolves the rank-1 residual here)
    spectrum = torch.tensor([1.0, 0.5] + [1e-12] * 10, dtype=torch.float64)
    g = torch.Generator().manual_seed(13)
    u = torch.linalg.qr(torch.randn(2, 12, 12, generator=g, dtype=torch.float64))[0]
    v = torch.linalg.qr(torch.randn(2, 20, 12, generator=g, dtype=torch.float64))[0]
    exact, batched, redone = _routes(u * spectrum @ v.mT)
    assert redone == [2, 2]
    assert all(torch.equal(batched[name].value, exact[name].value) for name in SPECTRAL)


def test_the_rounding_the_two_stages_assume_holds() -> None:
    # W = Q^T Z in float64 against the same product in extended precision: its error, in units
    # of sqrt(k) eps64 sigma_max, stays below the 4 that `DeflatedTokens` assumes
    if np.finfo(np.longdouble).eps >= np.finfo(np.float64).eps:
        pytest.skip("numpy's longdouble is float64 on this platform: no extended precision")
    worst = 0.0
    plain = torch.randn(64, 96, generator=torch.Generator().manual_seed(14), dtype=torch.float64)
    for x in [*_collapsed_float32(128, 192).double(), plain]:
        _, q = torch.linalg.eigh(x @ x.mT)
        w = (q.mT @ x).numpy().astype(np.longdouble)
        extended = q.numpy().astype(np.longdouble).T @ x.numpy().astype(np.longdouble)
        error = np.linalg.norm((w - extended).astype(np.float64), 2)
        scale = len(q) ** 0.5 * np.finfo(np.float64).eps * float(torch.linalg.matrix_norm(x, 2))
        worst = max(worst, error / scale)
    assert 0 < worst < 4


def test_a_state_surely_at_the_floor_takes_no_svd_and_says_so() -> None:
    g = torch.Generator().manual_seed(2)
    identical = torch.randn(2, 1, 20, generator=g).expand(2, 12, 20)
    exact, batched, redone = _routes(identical)
    assert redone == [0]  # float32 states: sigma_min / sigma_max below 1.2e-6 on either route
    for name in ("min_sv", "min_sv_rel", "rank1_rel"):
        assert batched[name].at_floor.all() and exact[name].at_floor.all(), name
    for name in ("stable_rank", "effective_rank", "numerical_rank"):
        assert torch.allclose(batched[name].value, exact[name].value, rtol=SPECTRA_RTOL), name
    # the same states made in float64: their floor (2.2e-15) is below what either stage resolves
    _, _, redone = _routes(identical.double())
    assert redone == [2, 2]


def test_identical_tokens_need_no_svd_however_many() -> None:
    # 600 tokens: 599 eigenvalues read as 0, each possibly up to sqrt(2 E) = 2e-7 sigma_max by
    # the Gram alone (effective_rank's bound 2e-3), but together no more than the distance of
    # the tokens from their mean, 0 here
    token = torch.randn(1, 1, 700, generator=torch.Generator().manual_seed(9))
    exact, batched, redone = _routes(token.expand(1, 600, 700))
    assert redone == [0]
    assert torch.allclose(batched["effective_rank"].value, exact["effective_rank"].value)
    assert torch.equal(batched["numerical_rank"].value, exact["numerical_rank"].value)


@pytest.mark.parametrize("pads", [0, 8])
def test_a_spectrum_whose_effective_rank_the_gram_cannot_bound_is_measured_again(pads) -> None:
    # 63 singular values at 1e-7 sigma_max: eigenvalues just above the Gram's resolution, each
    # read to about 70 %, together enough to move effective_rank by more than SPECTRA_RTOL / 2
    spectrum = torch.cat([torch.ones(1, dtype=torch.float64), torch.full((63,), 1e-7)])
    noisy = _spectrum_states(spectrum, 1, 80, 5).double()
    clean = _spectrum_states(torch.logspace(0, -3, 64, dtype=torch.float64), 1, 80, 6).double()
    x = torch.cat([torch.cat([noisy, clean]), torch.zeros(2, pads, 80, dtype=torch.float64)], 1)
    mask = torch.arange(64 + pads) < 64
    exact, batched, redone = _routes(x, torch.float32, mask.expand(2, -1))
    assert redone == [1, 0]  # the two stages resolve it
    assert _close(batched, exact, ["effective_rank"])


def _only_rank1_rel() -> tuple[torch.Tensor, torch.dtype]:
    # ||X||_F^2 - sigma_1^2 about 1e-11 sigma_1^2: above float32's floor, below the resolution
    spectrum = torch.cat([torch.tensor([1.0, 3e-6], dtype=torch.float64), torch.full((10,), 1e-7)])
    return _spectrum_states(spectrum, 1, 20, 7).double(), torch.float32


def _only_numerical_rank() -> tuple[torch.Tensor, torch.dtype]:
    # float64 states of identical tokens: numerical_rank's threshold (2.2e-15 sigma_max) lies
    # below what the Gram resolves; for bfloat16 the rest is surely at the floor
    identical = torch.randn(
        1, 1, 20, generator=torch.Generator().manual_seed(8), dtype=torch.float64
    )
    return identical.expand(1, 12, 20), torch.bfloat16


@pytest.mark.parametrize("case", [_only_rank1_rel, _only_numerical_rank])
def test_a_value_only_one_rule_cannot_vouch_for_is_measured_again(case) -> None:
    x, source = case()
    exact, batched, redone = _routes(x, source)
    assert redone == [1, 1]  # neither stage vouches for it
    assert all(torch.equal(batched[name].value, exact[name].value) for name in SPECTRAL)


class _Reads:
    """Counts host reads (`.cpu()`, `.item()`, `.tolist()`, bool/int/float of a tensor) and
    `torch.linalg` decompositions while installed."""

    READS = ("cpu", "item", "tolist", "__bool__", "__int__", "__float__")
    DECOMPOSITIONS = ("eigvalsh", "eigh", "svdvals", "svd")

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reads: list[str] = []
        self.decompositions: list[str] = []
        for name in self.READS:
            monkeypatch.setattr(torch.Tensor, name, self._wrap(getattr(torch.Tensor, name), name))
        for name in self.DECOMPOSITIONS:
            monkeypatch.setattr(torch.linalg, name, self._count(getattr(torch.linalg, name), name))

    def _wrap(self, method, name):
        def counted(tensor, *args, **kwargs):
            self.reads.append(name)
            return method(tensor, *args, **kwargs)

        return counted

    def _count(self, function, name):
        def counted(*args, **kwargs):
            self.decompositions.append(name)
            return function(*args, **kwargs)

        return counted


def test_batched_route_reads_the_host_once_and_solves_once_per_layer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    g = torch.Generator().manual_seed(5)
    layers = [torch.randn(8, 32, 48, generator=g) for _ in range(3)]
    mask = torch.ones(8, 32, dtype=torch.bool)
    mask[2, 30:] = False
    measure_states(layers[0][:2], batched=True)  # torch's own first-call work stays out
    counter = _Reads(monkeypatch)
    for x in layers:
        measure_states(x, mask, batched=True)
    assert counter.reads == ["cpu"] * 3
    assert counter.decompositions == ["eigvalsh"] * 3


def test_batched_route_adds_one_copy_per_stage_for_sequences_it_redoes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    g = torch.Generator().manual_seed(6)
    x = torch.randn(4, 16, 24, generator=g, dtype=torch.float64)
    x[1] = x[1, :1]  # collapsed float64 states: above their floor (2.2e-15), so measured again
    counter = _Reads(monkeypatch)
    measure_states(x, batched=True)
    assert counter.reads.count("cpu") == 3
    # the Gram's eigvalsh; the two stages' eigh and eigvalsh on that sequence; then the
    # float64 route on it: its eigvalsh, the rank-1 residual's eigh, an SVD
    assert counter.decompositions == ["eigvalsh", "eigh", "eigvalsh", "eigvalsh", "eigh", "svdvals"]


@pytest.mark.parametrize(("given", "fills"), [("none", 0), ("all real", 1), ("pads", 1)])
def test_batched_route_zeroes_pads_unless_told_there_are_none(
    monkeypatch: pytest.MonkeyPatch, given: str, fills: int
) -> None:
    # it cannot ask the mask (a host read), so a mask means a pass that zeroes pad rows; None
    # (no pads, known where the mask was made) spares it
    x = torch.randn(4, 16, 24, generator=torch.Generator().manual_seed(15))
    mask = None if given == "none" else torch.ones(4, 16, dtype=torch.bool)
    if given == "pads":
        mask[1, 12:] = False
    exact = measure_states(x, mask, metrics=["res_comp_rel", "mu_rel"])
    calls = []
    real = torch.Tensor.masked_fill_
    monkeypatch.setattr(torch.Tensor, "masked_fill_", lambda t, *a: calls.append(1) or real(t, *a))
    out = measure_states(x, mask, metrics=["res_comp_rel", "mu_rel"], batched=True)
    assert len(calls) == fills
    for name, (value, _) in exact.items():
        assert torch.allclose(out[name].value, value, rtol=SUMS_RTOL, atol=0), name


def test_batched_route_reads_no_spectrum_for_o_nd_metrics(monkeypatch: pytest.MonkeyPatch) -> None:
    x = torch.randn(4, 16, 24, generator=torch.Generator().manual_seed(7))
    counter = _Reads(monkeypatch)
    out = measure_states(x, metrics=["res_comp_rel", "mu_rel", "cos_mean"], batched=True)
    assert counter.reads == ["cpu"] and counter.decompositions == []
    exact = measure_states(x, metrics=["mu_rel"])["mu_rel"].value
    assert torch.allclose(out["mu_rel"].value, exact, rtol=SUMS_RTOL, atol=0)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("nan", r"1 NaN value\(s\) \(first: sample 2, token 3\)"),
        ("short", r"1 real token\(s\) in sample 1"),
    ],
)
def test_batched_route_reports_bad_input_as_the_float64_route(change: str, message: str) -> None:
    x = torch.randn(4, 8, 6, generator=torch.Generator().manual_seed(8))
    mask = torch.ones(4, 8, dtype=torch.bool)
    if change == "nan":
        x[2, 3, 1] = float("nan")
    else:
        mask[1, 1:] = False
    for batched in (False, True):
        with pytest.raises(InputError, match=message):
            measure_states(x, mask, batched=batched)


def test_cpu_default_is_the_float64_route() -> None:
    x = torch.randn(3, 16, 24, generator=torch.Generator().manual_seed(9))
    default, exact = measure_states(x), measure_states(x, batched=False)
    assert all(torch.equal(default[n].value, exact[n].value) for n in default)
