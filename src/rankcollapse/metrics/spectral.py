"""Spectral metrics of the hidden states: how many directions the tokens still span.

All of them read the singular values shared through `Tokens` (one Gram matrix per sequence,
with a float64 SVD for ill-conditioned sequences; see `metrics._tokens`). They use the raw
(uncentred) X, as Wu et al. do.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rankcollapse.metrics._floor import dtype_floor
from rankcollapse.metrics._norms import safe_div
from rankcollapse.metrics._tokens import Tokens, evaluate


def stable_rank(x: Tensor, mask: Tensor | None = None) -> Tensor:
    """Stable rank: squared Frobenius norm over squared spectral norm.

    Formula: ||X||_F^2 / ||X||_2^2 = sum_i sigma_i^2 / sigma_1^2.
    Reference: Wu et al. 2024, stable rank.

    Between 1 (rank 1) and min(n_real, d); 0 for an all-zero state.

    Args:
        x: hidden states, shape (..., n, d), any float dtype.
        mask: True for real tokens, shape (..., n). Pads never enter.

    Returns:
        float64 tensor of shape (...).

    Example:
        >>> stable_rank(torch.tensor([[3.0, 0.0], [0.0, 1.0]]))
        tensor(1.1111, dtype=torch.float64)
    """
    return evaluate(_stable_rank, x, mask)


def _stable_rank(t: Tokens) -> Tensor:
    return safe_div(t.norm_sq, t.gram_eigenvalues[..., 0])


def effective_rank(x: Tensor, mask: Tensor | None = None) -> Tensor:
    """Effective rank: exp of the entropy of the normalised singular values.

    Formula: exp(-sum_i p_i log p_i), p_i = sigma_i / sum_j sigma_j.
    Reference: Roy and Vetterli 2007, "The effective rank", Def. 1.

    Between 1 (rank 1) and min(n_real, d); 0 for an all-zero state.

    Args:
        x: hidden states, shape (..., n, d), any float dtype.
        mask: True for real tokens, shape (..., n). Pads never enter.

    Returns:
        float64 tensor of shape (...).

    Example:
        >>> effective_rank(torch.tensor([[2.0, 0.0], [0.0, 2.0]]))
        tensor(2., dtype=torch.float64)
    """
    return evaluate(_effective_rank, x, mask)


def _effective_rank(t: Tokens) -> Tensor:
    sv = t.singular_values  # (..., k), 0 past the spectrum
    total = sv.sum(-1, keepdim=True)
    p = safe_div(sv, total)
    entropy = -torch.special.xlogy(p, p).sum(-1)  # 0 log 0 = 0
    return torch.where(total.squeeze(-1) == 0, 0.0, entropy.exp())


def numerical_rank(x: Tensor, mask: Tensor | None = None, *, rtol: float | None = None) -> Tensor:
    """Numerical rank: how many singular values exceed rtol x sigma_max.

    Formula: #{i : sigma_i > rtol * sigma_1}, i <= min(n_real, d).
    Reference: Golub and Van Loan, Matrix Computations (numerical rank); Wu et al. 2024.

    Args:
        x: hidden states, shape (..., n, d), any float dtype.
        mask: True for real tokens, shape (..., n). Pads never enter.
        rtol: relative threshold; None (default) = the floor of x's own dtype,
            10 x eps(x.dtype) (1.2e-6 for float32, 2.2e-15 for float64), so that rounding
            noise of the dtype that holds the states is not counted as rank.

    Returns:
        float64 tensor of shape (...) holding whole numbers; 0 for an all-zero state.

    Example:
        >>> numerical_rank(torch.tensor([[1.0, 0.0], [0.0, 1e-3]]), rtol=1e-2)
        tensor(1., dtype=torch.float64)
    """
    return evaluate(_numerical_rank, x, mask, rtol=rtol)


def _numerical_rank(t: Tokens, *, rtol: float | None = None) -> Tensor:
    rtol = dtype_floor(t.dtype) if rtol is None else rtol
    sv = t.singular_values  # (..., k)
    return (sv > rtol * sv[..., :1]).sum(-1).to(torch.float64)


def min_sv(x: Tensor, mask: Tensor | None = None) -> Tensor:
    """Smallest singular value among the min(n_real, d) of the state.

    Formula: sigma_min(X) = sigma_{min(n_real, d)}.
    Reference: Wu et al. 2024, minimum singular value.

    Accurate on nearly collapsed states too (float64 SVD when the Gram spectrum is too
    ill-conditioned to resolve it).

    Args:
        x: hidden states, shape (..., n, d), any float dtype.
        mask: True for real tokens, shape (..., n). Pads never enter.

    Returns:
        float64 tensor of shape (...), in the units of x.

    Example:
        >>> min_sv(torch.tensor([[3.0, 0.0], [0.0, 0.5]]))
        tensor(0.5000, dtype=torch.float64)
    """
    return evaluate(_min_sv, x, mask)


def _min_sv(t: Tokens) -> Tensor:
    return t.scale * _smallest(t)


def min_sv_rel(x: Tensor, mask: Tensor | None = None) -> Tensor:
    """Smallest singular value relative to the largest: how close the state is to losing rank.

    Formula: sigma_min(X) / sigma_max(X), over the min(n_real, d) singular values.
    Reference: Wu et al. 2024, minimum singular value (relative to the spectrum's scale).

    Args:
        x: hidden states, shape (..., n, d), any float dtype.
        mask: True for real tokens, shape (..., n). Pads never enter.

    Returns:
        float64 tensor of shape (...), in [0, 1]; 0 for a rank-deficient state (and for
        all-zero states).

    Example:
        >>> min_sv_rel(torch.tensor([[3.0, 0.0], [0.0, 0.5]]))
        tensor(0.1667, dtype=torch.float64)
    """
    return evaluate(_min_sv_rel, x, mask)


def _min_sv_rel(t: Tokens) -> Tensor:
    """sigma_min / sigma_max: the metric, and the relative size behind min_sv's floor flag."""
    return safe_div(_smallest(t), t.singular_values[..., 0])


def _smallest(t: Tokens) -> Tensor:
    return t.smallest(t.singular_values)


__all__ = ["effective_rank", "min_sv", "min_sv_rel", "numerical_rank", "stable_rank"]
