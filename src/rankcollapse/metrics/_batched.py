"""The accelerator's route to the shared quantities: no host reads while it works, float32 spectra.

`DeviceTokens` is `Tokens` (same single pass, same float64 norms and Gram matrix) with the
parts that read values on the host or solve a float64 eigenproblem per sequence replaced:

- Spectra: one batched float32 `eigvalsh` of every sequence's Gram matrix, scaled by its trace
  (||X||_F^2) so float32 holds it, in place of the float64 one. Its eigenvalues carry an
  absolute error of about eps32 lambda_max (eps32 = 1.2e-7), so on a sequence whose spectrum
  stays above FLOAT32_RCOND x lambda_max every sigma_i is within about 1e-5 (relative) of the
  float64 value, and so are the metrics made of them (the tolerance `SPECTRA_RTOL`, checked
  against the float64 route in tests/metrics/test_batched.py).
- The rest, where float32 cannot resolve a value: a sequence whose smallest eigenvalue lies
  below FLOAT32_RCOND x lambda_max (nearly rank-deficient or collapsed: min_sv, numerical_rank
  and the small terms of effective_rank sit near the floor there; rank1_rel below about 0.06),
  or whose ||X||_F^2 is outside the safe range of `Tokens` (all zero, huge, tiny, NaN), or
  which has fewer than 2 real tokens, is `to_redo`: the suite measures those sequences again on
  the float64 route (`Tokens`), after its one host copy, and takes those values.

Nothing here calls `bool`, `.item()` or `.cpu()` on a tensor: the suite reads everything on the
host in one copy per call (`suite.measure_states`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from rankcollapse.metrics._norms import safe_div
from rankcollapse.metrics._tokens import SAFE_EXPONENT, Tokens, computed_once

FLOAT32_RCOND = 4e-3
"""lambda_min / lambda_max below this (sigma_min / sigma_max below 0.063): the float64 route."""
SPECTRA_RTOL = 1e-4
"""Largest relative difference of a spectral metric on this route from the float64 route."""


class DeviceTokens(Tokens):
    """`Tokens` for an accelerator: float32 spectra, no host reads; `to_redo` marks the
    sequences whose values must come from the float64 route (module doc)."""

    deferred = True

    def __init__(self, x: Tensor, mask: Tensor | None = None, *, reads: tuple[str, ...] = ()):
        super().__init__(x, mask, reads=reads)
        self.n_sv = self.n_sv.clamp(min=1)  # a sequence without tokens is `invalid`, not a crash

    def _in_range(self, x: Tensor, sq: Tensor, scale: Tensor) -> tuple[Tensor, Tensor]:
        """Unchanged: a sequence out of the safe range (or not finite) is redone instead."""
        return x, sq

    @computed_once
    def gram_eigenvalues(self) -> Tensor:
        """sigma_i^2 from one batched float32 eigvalsh of G / tr G, descending, 0 past n_sv."""
        trace = self.norm_sq[..., None, None]  # tr X X^T = tr X^T X = ||X||_F^2
        scaled = safe_div(self.gram, trace).to(torch.float32)
        scaled = scaled.nan_to_num(0.0, 0.0, 0.0)  # NaN input is `invalid`: no solver error
        lam = torch.linalg.eigvalsh(scaled).flip(-1).to(torch.float64).clamp(min=0) * trace[..., 0]
        return lam * self._in_spectrum(lam)

    @computed_once
    def singular_values(self) -> Tensor:
        """sqrt of the float32 spectrum; sequences it cannot resolve are `to_redo`."""
        return self.gram_eigenvalues.sqrt()

    @computed_once
    def rank1_residual(self) -> Tensor:
        """sqrt(||X||_F^2 - sigma_1^2): near rank 1 the sequence is `to_redo` (no cancellation)."""
        return (self.norm_sq - self.gram_eigenvalues[..., 0]).clamp(min=0).sqrt()

    def to_redo(self) -> Tensor:
        """True (shape (...)) for the sequences the float64 route must measure again: out of the
        safe range, fewer than 2 real tokens, or (when a spectrum was taken) a spectrum
        reaching below FLOAT32_RCOND x lambda_max."""
        bound = 2.0 ** (2 * SAFE_EXPONENT)
        redo = ~((self.norm_sq < bound) & (self.norm_sq > 1 / bound)) | self.invalid()
        if "gram_eigenvalues" in self.__dict__:  # only metrics that took a spectrum need it
            lam = self.gram_eigenvalues
            smallest = lam.gather(-1, (self.n_sv - 1).clamp(min=0).unsqueeze(-1)).squeeze(-1)
            redo |= smallest < FLOAT32_RCOND * lam[..., 0]
        return redo

    def invalid(self) -> Tensor:
        """True (shape (...)) for a sequence that is bad input: NaN or Inf in a real token
        (or finite values too large to square: the whole-batch check tells them apart), or
        fewer than 2 real tokens. The suite then checks the whole batch, for the error."""
        return ~torch.isfinite(self.norm_sq) | (self.n_real < 2)
