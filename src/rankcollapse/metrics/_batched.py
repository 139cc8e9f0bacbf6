"""The accelerator's route to the shared quantities: no host reads while it works, no SVD.

`DeviceTokens` is `Tokens` (same single pass, same float64 norms, Gram matrix and batched
float64 `eigvalsh`) with the parts that read values on the host or take an SVD per sequence
replaced. Measured on an H200 (docs/gpu.md): a batched float64 `eigvalsh` of 32 Gram matrices
of 512 took 136 ms and a float32 one 414 ms (cuSOLVER solves batched float32 problems by
Jacobi sweeps); a float64 SVD of one 2048 x 4096 sequence took 334 ms, the eigvalsh of eight
2048 x 2048 Grams 196 ms.

The Gram eigenvalues carry an absolute error of at most E = 4 sqrt(k) eps64 lambda_max
(`resolution`; k the Gram's size; measured at most 1.4 sqrt(k) eps64 lambda_max against an
SVD, on random, collapsed, low-rank and massive-activation states of k = 128 to 2048).
Eigenvalues below E read as 0, and every value is taken from them, except for a sequence that
is `to_redo` when one of its values could be off by more than SPECTRA_RTOL: after the suite's
one host copy it is measured again, first with its spectrum in two stages (`DeflatedTokens`,
which resolves states collapsed to their rounding noise), then, if those cannot vouch for it
either, on the float64 route with its SVD. The rules, with E each eigenvalue's error bound:

- min_sv: lambda_min below E / SPECTRA_RTOL, unless sigma_min / sigma_max is surely at the
  floor of the dtype that made the states (then it is rounding noise on either route, and
  flagged);
- effective_rank: the first-order bound on its relative error, sum_i |log p_i + H| dsigma_i /
  sum_j sigma_j, above SPECTRA_RTOL / 2; dsigma_i = E / sigma_i, and for the m sigma_i read
  as 0 the smaller of sqrt(2 E) and ||X - 1 mu^T||_F / sqrt(m) (mu the mean token: the best
  rank-1 approximation of X is no further from X, so those m hold at most that much);
- numerical_rank: an eigenvalue within E of its threshold;
- rank1_rel: ||X||_F^2 - sigma_1^2 below E / SPECTRA_RTOL, unless surely at the floor;
- any: ||X||_F^2 outside the safe range of `Tokens` (all zero, huge, tiny, NaN), or fewer
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
SUMS_RTOL = 1e-12
"""The same for every other metric: float64 sums taken by other kernels, in another order
(`_tokens._norms`, fused)."""


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

    def _solvable(self, gram: Tensor) -> Tensor:
        """NaN and Inf read as 0: such a sequence is `invalid` (or out of range) and redone,
        and the solver must not fail on it first."""
        return gram.nan_to_num(0.0, 0.0, 0.0)

    @computed_once
    def resolution(self) -> Tensor:
        """Each eigenvalue's error bound, (..., k): E = 4 sqrt(k) eps64 lambda_max for all."""
        return _gram_error(self.gram_eigenvalues)

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
        if "singular_values" in self.__dict__:  # only metrics that took a spectrum need it
            redo |= self._spectrum_unresolved(floor_sq)
        if "rank1_residual" in self.__dict__:
            tail, e = self.rank1_residual.square(), self.resolution[..., 0]
            redo |= (tail < e / SPECTRA_RTOL) & (tail + e > floor_sq * self.norm_sq)
        return redo

    def _spectrum_unresolved(self, floor_sq: float) -> Tensor:
        """True (shape (...)) where min_sv, effective_rank or numerical_rank from the Gram
        eigenvalues could be off by more than SPECTRA_RTOL (module doc)."""
        lam, sv, e = self.gram_eigenvalues, self.singular_values, self.resolution
        top = lam[..., :1]
        smallest, e_smallest = self.smallest(lam).unsqueeze(-1), self.smallest(e).unsqueeze(-1)
        min_sv = (smallest < e_smallest / SPECTRA_RTOL) & (smallest + e_smallest > floor_sq * top)
        real = self._in_spectrum(lam)
        # the m sigma_i read as 0 are each below sqrt(2 E) and hold together at most
        # c^2 = ||X - 1 mu^T||_F^2, mu the mean token (X's best rank-1 approximation is no
        # further from X): c / sqrt(m) each where they weigh most in the entropy
        count = (real & (sv == 0)).sum(-1, keepdim=True).clamp(min=1).to(e.dtype)
        hidden = torch.minimum((2 * e).sqrt(), self.centred_frobenius.unsqueeze(-1) / count.sqrt())
        error = torch.where(sv > 0, e / sv.clamp(min=1e-300), hidden) * real
        total = sv.sum(-1, keepdim=True).clamp(min=1e-300)
        share = sv / total
        entropy = -torch.special.xlogy(share, share).sum(-1, keepdim=True)
        p = share.clamp(min=error / total)
        terms = torch.where(error > 0, (p.log().abs() + entropy) * error, 0.0)  # no 0 x inf
        effective_rank = terms.sum(-1, keepdim=True) / total
        threshold = dtype_floor(self.dtype) ** 2 * top  # numerical_rank's, in eigenvalues
        numerical_rank = (real & ((lam - threshold).abs() <= e)).any(-1, keepdim=True)
        return (min_sv | ~(effective_rank <= SPECTRA_RTOL / 2) | numerical_rank).squeeze(-1)

    def invalid(self) -> Tensor:
        """True (shape (...)) for a sequence that is bad input: NaN or Inf in a real token
        (or finite values too large to square: the whole-batch check tells them apart), or
        fewer than 2 real tokens. The suite then checks the whole batch, for the error."""
        return ~torch.isfinite(self.norm_sq) | (self.n_real < 2)


class DeflatedTokens(DeviceTokens):
    """`DeviceTokens` for the sequences the Gram alone cannot vouch for: their spectrum in two
    stages, still without an SVD (measured against one: every singular value above 1e-12
    sigma_max within 6e-8, where the Gram's small ones were off by 100 %).

    1. eigh(G) = Q diag(lambda) Q^T, and the rows w_i = q_i^T Z of W = Q^T Z (Z = X when G =
       X X^T, X^T when G = X^T X): W has X's singular values, and ||w_i||^2 = lambda_i.
    2. Split after the top r eigenvalues, at the largest ratio lambda_r / lambda_{r+1} among
       those with lambda_r >= E / SPECTRA_RTOL (resolved by stage 1); the other rows S are
       formed explicitly, so their Gram S S^T is exact to its own scale, not to lambda_max,
       and its eigenvalues mu_j (one batched `eigvalsh`) are the small ones.
    3. The top r keep stage 1's error E; mu_j's is eps_k mu_max + eps_L sum(mu) (the solver,
       and the rounding of S S^T, L the rows' length) + ||C||^2 / gap (the coupling C = W_top
       S^T that the split drops, with its own rounding; gap = lambda_r - E - mu_max - those:
       Li and Li's quadratic residual bound) + 2 sqrt(mu_j) D + D^2 (D = eps_k sigma_max: the
       rounding of W itself, measured at most 0.15 sqrt(k) eps64 sigma_max), with eps_m =
       `_rounding(m)`. A sequence whose gap is not positive gets infinite errors: redone.

    Everything `to_redo` asks then uses these bounds; a sequence still unresolved takes the
    float64 route, with its SVD.
    """

    @computed_once
    def _two_stages(self) -> tuple[Tensor, Tensor]:
        """(eigenvalues descending, (..., k); their error bounds, (..., k))."""
        lam, q = torch.linalg.eigh(self._solvable(self.gram))
        lam, q = lam.flip(-1).clamp(min=0) * self._in_spectrum(lam), q.flip(-1)
        k, first = lam.shape[-1], _gram_error(lam)
        if k < 2:
            return lam, first
        x = self.states()
        w = q.mT @ (x if self.gram_of_tokens else x.mT)  # (..., k, L): rows q_i^T Z
        del x, q  # freed before the next products: the stage holds at most W and two k x k
        index = torch.arange(k, device=lam.device)
        ratio = lam[..., :-1] / lam[..., 1:].clamp(min=1e-300)
        ratio = ratio.masked_fill(lam[..., :-1] < first[..., :-1] / SPECTRA_RTOL, -1.0)
        r = ratio.argmax(-1, keepdim=True) + 1  # (..., 1): rows 0..r-1 are the top block
        small = index >= r  # (..., k)
        products = w @ (w * small.unsqueeze(-1)).mT  # top block's rows: C; the others: S S^T
        length = w.shape[-1]
        del w
        rows = torch.linalg.vector_norm(products, dim=-1).square()  # (..., k)
        coupling = (rows * ~small).sum(-1, keepdim=True).sqrt()  # ||C||_F
        products.masked_fill_(~small.unsqueeze(-1), 0.0)  # S S^T, the top block's rows 0
        mu = torch.linalg.eigvalsh(products).flip(-1).clamp(min=0)
        top_sum = (lam * ~small).sum(-1, keepdim=True)
        small_sum = mu.sum(-1, keepdim=True)
        coupling = coupling + _rounding(length) * (top_sum * small_sum).sqrt()
        solve = _rounding(k) * mu[..., :1] + _rounding(length) * small_sum
        gap = lam.gather(-1, r - 1) - first[..., :1] - mu[..., :1] - solve
        d = _rounding(k) * lam[..., :1].sqrt()
        shifted = mu.gather(-1, (index - r).clamp(min=0))  # mu_{i-r} at i >= r
        error = solve + coupling.square() / gap + 2 * shifted.sqrt() * d + d.square()
        error = torch.where(gap > 0, error, torch.inf)
        values = torch.where(small, shifted, lam) * self._in_spectrum(lam)
        return values, torch.where(small, error, first)

    @computed_once
    def gram_eigenvalues(self) -> Tensor:
        """The two stages' eigenvalues, descending (class doc)."""
        return self._two_stages[0]

    @computed_once
    def resolution(self) -> Tensor:
        """Each eigenvalue's error bound from the two stages, (..., k) (class doc)."""
        return self._two_stages[1]


def _gram_error(lam: Tensor) -> Tensor:
    """E = `_rounding(k)` lambda_max for each of the k Gram eigenvalues `lam` (..., k)."""
    return _rounding(lam.shape[-1]) * lam[..., :1].expand_as(lam)


def _rounding(size: int) -> float:
    """4 sqrt(size) eps64: the relative error this route assumes of a float64 product or
    symmetric eigensolver of inner size `size` (measured at most 1.6 sqrt(size) eps64 for the
    Gram's eigenvalues and 0.15 sqrt(size) eps64 for W = Q^T Z)."""
    return 4 * size**0.5 * torch.finfo(torch.float64).eps
