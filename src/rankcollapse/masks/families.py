"""Attention masks as boolean (n, n) tensors: `m[i, j]` True iff query i may attend to key j.

In the graph language of Wu et al. 2024 (attention masks as directed graphs), `m[i, j]` is the edge j -> i
(information flows from key j to query i). Every family includes the self-loops `m[i, i]`.
Masks compose with `&` and `|`; pass the result through `from_matrix` to validate it.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rankcollapse.errors import ConfigError
from rankcollapse.masks._validation import check_mask
from rankcollapse.sizes import check_int, check_probability


def _offsets(n: int) -> Tensor:
    """(n, n) integer matrix of i - j (query index minus key index)."""
    index = torch.arange(n)
    return index[:, None] - index[None, :]


def complete(n: int) -> Tensor:
    """Every token attends to every token (encoder attention).

    Example:
        >>> complete(2)
        tensor([[True, True],
                [True, True]])
    """
    n = check_int("n", n, low=1, what="number of tokens")
    return torch.ones(n, n, dtype=torch.bool)


def causal(n: int) -> Tensor:
    """Token i attends to tokens 0..i (decoder attention): `i - j >= 0`.

    Example:
        >>> causal(3).int()
        tensor([[1, 0, 0],
                [1, 1, 0],
                [1, 1, 1]], dtype=torch.int32)
    """
    n = check_int("n", n, low=1, what="number of tokens")
    return _offsets(n) >= 0


def window(n: int, w: int) -> Tensor:
    """Bidirectional sliding window of half-width w: `|i - j| <= w`.

    Example:
        >>> window(4, 1).int()
        tensor([[1, 1, 0, 0],
                [1, 1, 1, 0],
                [0, 1, 1, 1],
                [0, 0, 1, 1]], dtype=torch.int32)
    """
    n = check_int("n", n, low=1, what="number of tokens")
    w = check_int("w", w, low=0, what="window half-width")
    return _offsets(n).abs() <= w


def causal_window(n: int, w: int) -> Tensor:
    """Causal sliding window of width w: token i attends to i-w..i, `0 <= i - j <= w`.

    Example:
        >>> causal_window(3, 1).int()
        tensor([[1, 0, 0],
                [1, 1, 0],
                [0, 1, 1]], dtype=torch.int32)
    """
    n = check_int("n", n, low=1, what="number of tokens")
    w = check_int("w", w, low=0, what="window width")
    offsets = _offsets(n)
    return (offsets >= 0) & (offsets <= w)


def sinks(n: int, n_sinks: int, w: int) -> Tensor:
    """Global ("sink") tokens plus a bidirectional window (Longformer / BigBird style).

    The first `n_sinks` tokens are global: every token attends to them and they attend to every
    token. All other pairs follow `window(n, w)` (`|i - j| <= w`). With `n_sinks >= 1` the mask is
    strongly connected with radius at most 1 (each sink reaches every token in one step).

    Example:
        >>> sinks(4, 1, 0).int()
        tensor([[1, 1, 1, 1],
                [1, 1, 0, 0],
                [1, 0, 1, 0],
                [1, 0, 0, 1]], dtype=torch.int32)
    """
    m = window(n, w)
    n_sinks = check_int("n_sinks", n_sinks, low=0, what="number of global tokens")
    if n_sinks > n:
        raise ConfigError(f"n_sinks must be at most the number of tokens n={n}, got {n_sinks}.")
    m[:, :n_sinks] = True
    m[:n_sinks, :] = True
    return m


def dilated(n: int, w: int, dilation: int) -> Tensor:
    """Dilated (strided) window: `|i - j| <= w * dilation` and `(i - j) % dilation == 0`.

    Each token sees w tokens on each side, `dilation` apart. With dilation > 1 the graph splits
    into `dilation` disconnected residue classes, so no token is a center node.

    Example:
        >>> dilated(5, 1, 2).int()
        tensor([[1, 0, 1, 0, 0],
                [0, 1, 0, 1, 0],
                [1, 0, 1, 0, 1],
                [0, 1, 0, 1, 0],
                [0, 0, 1, 0, 1]], dtype=torch.int32)
    """
    n = check_int("n", n, low=1, what="number of tokens")
    w = check_int("w", w, low=0, what="keys on each side")
    dilation = check_int("dilation", dilation, low=1, what="stride between attended keys")
    offsets = _offsets(n)
    return (offsets.abs() <= w * dilation) & (offsets % dilation == 0)


def random_sparse(n: int, p: float, *, seed: int) -> Tensor:
    """Each off-diagonal edge present independently with probability p, plus all self-loops.

    Deterministic by `seed` (a private generator; global RNG state is untouched).

    Example:
        >>> bool(random_sparse(5, 0.0, seed=0).equal(torch.eye(5, dtype=torch.bool)))
        True
    """
    n = check_int("n", n, low=1, what="number of tokens")
    p = check_probability("p", p)
    seed = check_int("seed", seed, low=0, what="random seed")
    generator = torch.Generator().manual_seed(seed)
    edges = torch.rand(n, n, generator=generator, dtype=torch.float64) < p
    return edges | torch.eye(n, dtype=torch.bool)


def from_matrix(m: object) -> Tensor:
    """A user-given mask (tensor, array or nested lists of bools), validated by `check_mask`.

    Returns a boolean tensor; raises InputError for a non-square, non-boolean matrix, a row
    attending to nothing or a missing self-loop.

    Example:
        >>> from_matrix([[True, False], [True, True]]).equal(causal(2))
        True
    """
    if not isinstance(m, Tensor):
        m = torch.as_tensor(m)
    return check_mask(m)


def to_bias(m: Tensor, dtype: torch.dtype = torch.float64) -> Tensor:
    """The additive attention bias of a mask: 0 where attending is allowed, -inf elsewhere.

    Adding it to the attention scores before the softmax gives the masked softmax of
    Wu et al. 2024.

    Example:
        >>> to_bias(causal(2))
        tensor([[0., -inf],
                [0., 0.]], dtype=torch.float64)
    """
    return bias_of(check_mask(m), dtype)


def bias_of(allowed: Tensor, dtype: torch.dtype, *, finite: bool = False) -> Tensor:
    """0 where `allowed` (any boolean shape, e.g. a mask combined with padding) is True, and
    -inf elsewhere, or the dtype's most negative number with `finite` (what Hugging Face
    models add to their scores). The one place a mask becomes a bias.

    Example:
        >>> bias_of(torch.tensor([True, False]), torch.float32, finite=True)
        tensor([ 0.0000e+00, -3.4028e+38])
    """
    blocked = torch.finfo(dtype).min if finite else float("-inf")
    zero = torch.zeros((), dtype=dtype, device=allowed.device)
    return torch.where(allowed, zero, torch.tensor(blocked, dtype=dtype, device=allowed.device))
