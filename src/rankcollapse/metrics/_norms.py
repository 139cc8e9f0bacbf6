"""Norms and means over real tokens. Pad rows are exactly 0 (see `check_tokens`), so sums over
all rows are sums over real rows; only counts and maxima need the mask.
"""

from __future__ import annotations

import torch
from torch import Tensor


def safe_div(num: Tensor, den: Tensor) -> Tensor:
    """num / den, and 0 where den == 0 (a zero state: relative quantities of it are 0)."""
    return torch.where(den == 0, torch.zeros_like(num), num / torch.where(den == 0, 1.0, den))


def masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    """Mean of the real tokens, shape (..., 1, d); `x` has zero pad rows.

    The sum is a BLAS product with a vector of ones (faster than torch's sum over tokens).
    """
    n_real = mask.sum(-1, keepdim=True).to(x.dtype)  # (..., 1)
    return ((x.new_ones(x.shape[-2]) @ x) / n_real).unsqueeze(-2)


def frobenius(x: Tensor) -> Tensor:
    """||X||_F over the last two dims, shape (...)."""
    return torch.linalg.vector_norm(x, dim=(-2, -1))


def composite_of_magnitude(magnitude: Tensor) -> Tensor:
    """Dong's ||X||_{1,inf} = sqrt(||X||_1 ||X||_inf) from |X| (..., n, d), shape (...).

    ||X||_1 is the largest absolute column sum (a sum over tokens), ||X||_inf the largest
    absolute row sum (a sum over features); zero pad rows change neither. On the CPU both sums
    are BLAS products with a vector of ones (faster than torch's sums, and than two fused ord-1
    norms of X itself).
    """
    n, d = magnitude.shape[-2:]
    return composite_of_sums(magnitude.new_ones(n) @ magnitude, magnitude @ magnitude.new_ones(d))


def composite_of(x: Tensor) -> Tensor:
    """`composite_of_magnitude(|x|)` by two fused ord-1 norms, which read x twice and write
    nothing (|X| written first, then read twice, moves twice the bytes): an accelerator's way."""
    column_sums = torch.linalg.vector_norm(x, 1, dim=-2)  # (..., d)
    return composite_of_sums(column_sums, torch.linalg.vector_norm(x, 1, dim=-1))


def composite_of_sums(column_sums: Tensor, row_sums: Tensor) -> Tensor:
    """sqrt(max column sum) sqrt(max row sum) of |X|: (..., d) and (..., n) -> (...)."""
    return torch.sqrt(column_sums.amax(-1)) * torch.sqrt(row_sums.amax(-1))  # no overflow


def composite_norm(a: Tensor) -> Tensor:
    """Dong et al.'s composite ||A||_{1,inf} = sqrt(||A||_1 ||A||_inf) over the last two dims.

    Formula: ||A||_1 = largest absolute column sum, ||A||_inf = largest absolute row sum; not a
    true norm (no triangle inequality). Reference: Dong, Cordonnier, Loukas 2021, Sec. 2.

    Example:
        >>> composite_norm(torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64))
        tensor(6.4807, dtype=torch.float64)
    """
    return composite_of_magnitude(a.abs())
