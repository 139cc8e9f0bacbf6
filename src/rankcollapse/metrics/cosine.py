"""Pairwise cosines between tokens: anisotropy (all tokens pointing one way) as it grows."""

from __future__ import annotations

import torch  # noqa: F401 (the docstring examples use it)
from torch import Tensor

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
    return _pair_mean(t, t.cosines.abs())


def _pair_mean(t: Tokens, values: Tensor) -> Tensor:
    """Mean of values (..., n, n), 0 on pad rows and columns, over distinct real pairs."""
    n_pairs = t.n_real * (t.n_real - 1)  # >= 2: check_tokens guarantees 2 real tokens
    off_diagonal = values.sum((-2, -1)) - values.diagonal(dim1=-2, dim2=-1).sum(-1)
    return off_diagonal / n_pairs


__all__ = ["abs_cos_mean", "cos_mean"]
