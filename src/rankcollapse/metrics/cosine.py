"""Pairwise cosines between tokens: anisotropy (all tokens pointing one way) as it grows."""

from __future__ import annotations

import torch
from torch import Tensor

from rankcollapse.metrics._norms import safe_div
from rankcollapse.metrics._tokens import Tokens, evaluate


def cos_mean(x: Tensor, mask: Tensor | None = None) -> Tensor:
    """Mean cosine similarity over distinct pairs of real tokens.

    Formula: mean over i != j of x_i . x_j / (||x_i|| ||x_j||), real tokens only,
        = (|sum_i u_i|^2 - n') / (n (n - 1)), u_i = x_i / ||x_i||, n' nonzero tokens.
    Reference: Wu et al. 2024, pairwise cosine.

    A zero token has cosine 0 with every other token. Costs O(n d): no n x n matrix.

    Args:
        x: hidden states, shape (..., n, d), any float dtype.
        mask: True for real tokens, shape (..., n). Pads never enter.

    Returns:
        float64 tensor of shape (...) in [-1, 1]; 1 when all real tokens are parallel.

    Example:
        >>> cos_mean(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
        tensor(0.4714, dtype=torch.float64)
    """
    return evaluate(_cos_mean, x, mask)


def _cos_mean(t: Tokens) -> Tensor:
    # sum over i != j of cos_ij = |sum_i u_i|^2 - (number of nonzero u_i): no n x n matrix
    n_pairs = t.n_real * (t.n_real - 1)  # >= 2: check_tokens guarantees 2 real tokens
    return (t.unit_sum_sq - t.n_nonzero) / n_pairs


def abs_cos_mean(x: Tensor, mask: Tensor | None = None) -> Tensor:
    """Mean absolute cosine similarity over distinct pairs of real tokens.

    Formula: mean over i != j of |x_i . x_j| / (||x_i|| ||x_j||), real tokens only.
    Reference: Wu et al. 2024, mean |cosine|, anisotropy.

    Args:
        x: hidden states, shape (..., n, d), any float dtype.
        mask: True for real tokens, shape (..., n). Pads never enter.

    Returns:
        float64 tensor of shape (...) in [0, 1]; 1 when all real tokens lie on one line.

    Example:
        >>> abs_cos_mean(torch.tensor([[1.0, 0.0], [-1.0, 0.0]]))
        tensor(1., dtype=torch.float64)
    """
    return evaluate(_abs_cos_mean, x, mask)


def _abs_cos_mean(t: Tokens) -> Tensor:
    # sum_ij |x_i . x_j| / (||x_i|| ||x_j||) as the bilinear form r^T |G| r, r_i = 1 / ||x_i||
    # (0 for pads and zero tokens): no scaled n x n matrix of cosines is formed
    products = t.token_products  # (..., n, n)
    norms_sq = products.diagonal(dim1=-2, dim2=-1)  # (..., n)
    inverse = safe_div(torch.ones_like(norms_sq), norms_sq.sqrt())
    total = (inverse.unsqueeze(-2) @ products.abs() @ inverse.unsqueeze(-1))[..., 0, 0]
    diagonal = (norms_sq * inverse.square()).sum(-1)  # the n' cosines of a token with itself
    n_pairs = t.n_real * (t.n_real - 1)  # >= 2: check_tokens guarantees 2 real tokens
    return (total - diagonal) / n_pairs


__all__ = ["abs_cos_mean", "cos_mean"]
