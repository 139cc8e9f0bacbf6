"""Metrics of attention matrices: how sharp the rows are, and the eps of Wu et al.'s Thm 1.

Every function takes `a` (..., n, n), row i = query i, rows summing to 1, an optional token
`mask` (..., n) and, keyword-only, `edges`: the allowed (query, key) pairs, boolean and
broadcastable to a.shape (default: every pair of real tokens). Only real query rows count, and
only real keys; a real query must have at least one allowed real key.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from rankcollapse._validation import check_attention
from rankcollapse.metrics._tokens import check_batch


class Attention(NamedTuple):
    """Checked attention: float64 weights (pads 0), token mask, allowed real edges."""

    a: Tensor  # (..., n, n)
    mask: Tensor  # (..., n)
    edges: Tensor  # (..., n, n)

    @classmethod
    def of(cls, a: Tensor, mask: Tensor | None = None, edges: Tensor | None = None) -> Attention:
        if isinstance(a, Tensor):
            check_batch(tuple(a.shape), "a")
        return cls(*check_attention(a.detach() if isinstance(a, Tensor) else a, mask, edges))

    def row_mean(self, per_row: Tensor) -> Tensor:
        """Mean of a per-query quantity (..., n) over the real query rows, shape (...)."""
        return (per_row * self.mask).sum(-1) / self.mask.sum(-1)


def attn_entropy(a: Tensor, mask: Tensor | None = None, *, edges: Tensor | None = None) -> Tensor:
    """Mean Shannon entropy (in nats) of the attention rows.

    Formula: mean over real queries i of -sum_j a_ij log a_ij (0 log 0 = 0).
    Reference: Zhai et al. 2023 (ICML), attention entropy collapse.

    0 for one-hot rows, log(#keys) for uniform rows. `edges` is not needed (weights outside the
    allowed edges are 0 anyway) and is accepted so that all attention metrics share one call.

    Args:
        a: attention, shape (..., n, n), rows sum to 1, any float dtype.
        mask: True for real tokens, shape (..., n) (for heads (b, h, n, n): mask[:, None, :]).
        edges: ignored; see above.

    Returns:
        float64 tensor of shape (...).

    Example:
        >>> attn_entropy(torch.full((2, 2), 0.5))  # log 2
        tensor(0.6931, dtype=torch.float64)
    """
    return _attn_entropy(Attention.of(a, mask, edges))


def _attn_entropy(p: Attention) -> Tensor:
    return p.row_mean(-torch.special.xlogy(p.a, p.a).sum(-1))


def attn_min_edge(a: Tensor, mask: Tensor | None = None, *, edges: Tensor | None = None) -> Tensor:
    """Smallest attention weight on an allowed edge: the eps of Wu et al.'s Thm 1.

    Formula: min over allowed (i, j) between real tokens of a_ij.
    Reference: Wu et al. 2024, Thm 1.

    Args:
        a: attention, shape (..., n, n), rows sum to 1, any float dtype.
        mask: True for real tokens, shape (..., n) (for heads (b, h, n, n): mask[:, None, :]).
        edges: allowed edges, boolean, broadcastable to a.shape; None = all real pairs.

    Returns:
        float64 tensor of shape (...).

    Example:
        >>> a = torch.tensor([[1.0, 0.0], [0.25, 0.75]])
        >>> attn_min_edge(a, edges=torch.tensor([[True, False], [True, True]]))
        tensor(0.2500, dtype=torch.float64)
    """
    return _attn_min_edge(Attention.of(a, mask, edges))


def _attn_min_edge(p: Attention) -> Tensor:
    return torch.where(p.edges, p.a, torch.inf).amin((-2, -1))


def attn_dist_uniform(
    a: Tensor, mask: Tensor | None = None, *, edges: Tensor | None = None
) -> Tensor:
    """Mean total-variation distance of each row from the uniform row over its allowed keys.

    Formula: mean over real queries i of (1/2) sum_j |a_ij - 1[(i, j) allowed] / #allowed_i|.
    Reference: Wu et al. 2024, W_Q = W_K = 0.

    Total variation (half the L1 distance), in [0, 1]: 0 for uniform attention over the allowed
    keys, 1 - 1/#allowed for a one-hot row; weight on disallowed keys counts fully.

    Args:
        a: attention, shape (..., n, n), rows sum to 1, any float dtype.
        mask: True for real tokens, shape (..., n) (for heads (b, h, n, n): mask[:, None, :]).
        edges: allowed edges, boolean, broadcastable to a.shape; None = all real pairs.

    Returns:
        float64 tensor of shape (...).

    Example:
        >>> attn_dist_uniform(torch.eye(2))  # one-hot rows over 2 keys
        tensor(0.5000, dtype=torch.float64)
    """
    return _attn_dist_uniform(Attention.of(a, mask, edges))


def _attn_dist_uniform(p: Attention) -> Tensor:
    allowed = p.edges.to(torch.float64)
    uniform = allowed / allowed.sum(-1, keepdim=True).clamp(min=1)  # (..., n, n); pad rows 0
    return p.row_mean(0.5 * (p.a - uniform).abs().sum(-1))


__all__ = ["attn_dist_uniform", "attn_entropy", "attn_min_edge"]
