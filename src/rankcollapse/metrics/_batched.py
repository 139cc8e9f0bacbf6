"""The accelerator's route to the shared quantities: no host reads while it works, no SVD.

`DeviceTokens` is `Tokens` (same single pass, same float64 norms, Gram matrix and batched
float64 `eigvalsh`) with the parts that read values on the host or take an SVD per sequence
replaced. Measured on an H200 (docs/gpu.md): a batched float64 `eigvalsh` of 32 Gram matrices
of 512 took 136 ms and a float32 one 414 ms (cuSOLVER solves batched float32 problems by
Jacobi sweeps); a float64 SVD of one 2048 x 4096 sequence took 334 ms, the eigvalsh of eight
2048 x 2048 Grams 196 ms.

The Gram eigenvalues carry an absolute error of at most about E = k eps64 lambda_max (k the
Gram's size; `resolution`), so an eigenvalue of at least E / SPECTRA_RTOL gives its sigma_i
within SPECTRA_RTOL / 2 (relative), and the metrics made of those sigma_i within SPECTRA_RTOL
of the float64 route (which takes an SVD below lambda_min / lambda_max = 1e-7, for 1e-8).
Eigenvalues below E read as 0. A sequence is `to_redo`, measured again on the float64 route
after the suite's one host copy, when

- its spectrum has an eigenvalue between E and E / SPECTRA_RTOL (not resolved, not 0), or
  an eigenvalue below E while sigma_min / sigma_max is not surely at the floor of the dtype
  that made the states (a collapsed state whose min_sv is flagged needs no SVD: its value is
  rounding noise on either route);
- ||X||_F^2 - sigma_1^2 (the rank-1 residual) is below E / SPECTRA_RTOL and not surely at
  that floor;
- ||X||_F^2 is outside the safe range of `Tokens` (all zero, huge, tiny, NaN), or it has fewer
  than 2 real tokens.

Nothing here calls `bool`, `.item()` or `.cpu()` on a tensor: the suite reads everything on the
host in one copy per call (`suite.measure_states`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from rankcollapse.metrics._floor import dtype_floor
from rankcollapse.metrics._tokens import SAFE_EXPONENT, Tokens, computed_once

SPECTRA_RTOL = 1e-4
"""Largest relative difference of a spectral metric on this route from the float64 route,
for values not at the floor."""


class DeviceTokens(Tokens):
    """`Tokens` for an accelerator: float64 Gram spectra without SVDs, no host reads;
    `to_redo` marks the sequences whose values must come from the float64 route (module doc)."""

    deferred = True

    def __init__(self, x: Tensor, mask: Tensor | None = None, *, reads: tuple[str, ...] = ()):
        super().__init__(x, mask, reads=reads)
        self.n_sv = self.n_sv.clamp(min=1)  # a sequence without tokens is `invalid`, not a crash

    def _in_range(self, x: Tensor, sq: Tensor, scale: Tensor) -> tuple[Tensor, Tensor]:
        """Unchanged: a sequence out of the safe range (or not finite) is redone instead."""
        return x, sq

    @computed_once
    def gram_eigenvalues(self) -> Tensor:
        """`Tokens.gram_eigenvalues` of the Gram with NaN and Inf read as 0: such a sequence is
        `invalid` (or out of range) and redone, and the solver must not fail on it first."""
        lam = torch.linalg.eigvalsh(self.gram.nan_to_num(0.0, 0.0, 0.0)).flip(-1).clamp(min=0)
        return lam * self._in_spectrum(lam)

    @computed_once
    def resolution(self) -> Tensor:
        """E = k eps64 lambda_max, shape (..., 1): the Gram eigenvalues' absolute error bound."""
        k = self.gram.shape[-1]
        return k * torch.finfo(torch.float64).eps * self.gram_eigenvalues[..., :1]

    @computed_once
    def singular_values(self) -> Tensor:
        """sqrt of the Gram eigenvalues, those below `resolution` read as 0 (no SVD)."""
        lam = self.gram_eigenvalues
        return torch.where(lam < self.resolution, 0.0, lam).sqrt()

    @computed_once
    def rank1_residual(self) -> Tensor:
        """sqrt(||X||_F^2 - sigma_1^2): near rank 1, `to_redo` unless surely at the floor."""
        return (self.norm_sq - self.gram_eigenvalues[..., 0]).clamp(min=0).sqrt()

    def to_redo(self, source: torch.dtype) -> Tensor:
        """True (shape (...)) for the sequences the float64 route must measure again (module
        doc); `source` is the dtype that made the states, whose floor decides what is noise."""
        bound = 2.0 ** (2 * SAFE_EXPONENT)
        redo = ~((self.norm_sq < bound) & (self.norm_sq > 1 / bound)) | self.invalid()
        floor_sq = dtype_floor(source) ** 2
        if "gram_eigenvalues" in self.__dict__:  # only metrics that took a spectrum need it
            lam, e = self.gram_eigenvalues, self.resolution
            real = self._in_spectrum(lam)
            unresolved = (real & (lam >= e) & (lam < e / SPECTRA_RTOL)).any(-1)
            smallest = lam.gather(-1, (self.n_sv - 1).unsqueeze(-1))  # (..., 1)
            noise = (smallest < e) & (smallest + e > floor_sq * lam[..., :1])
            redo |= unresolved | noise.squeeze(-1)
        if "rank1_residual" in self.__dict__:
            tail, e = self.rank1_residual.square(), self.resolution.squeeze(-1)
            redo |= (tail < e / SPECTRA_RTOL) & (tail + e > floor_sq * self.norm_sq)
        return redo

    def invalid(self) -> Tensor:
        """True (shape (...)) for a sequence that is bad input: NaN or Inf in a real token
        (or finite values too large to square: the whole-batch check tells them apart), or
        fewer than 2 real tokens. The suite then checks the whole batch, for the error."""
        return ~torch.isfinite(self.norm_sq) | (self.n_real < 2)
