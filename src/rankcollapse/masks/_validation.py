"""Input checks for masks and mask parameters: each check lives here once."""

from __future__ import annotations

import torch
from torch import Tensor

from rankcollapse.errors import InputError

_FIX = "add self-loops with `m | torch.eye(n, dtype=torch.bool)`"


def _listed(indices: Tensor, limit: int = 8) -> str:
    """'1, 4, 7' (or the first `limit` of them and how many more)."""
    values = indices.tolist()
    shown = ", ".join(str(v) for v in values[:limit])
    return shown + (f" and {len(values) - limit} more" if len(values) > limit else "")


def check_mask(m: Tensor, n: int | None = None) -> Tensor:
    """Check that `m` is a valid attention mask and return it.

    A valid mask is a boolean (n, n) tensor, `m[i, j]` True iff query i may attend to key j,
    with every diagonal entry True (each token sees itself), so no row attends to nothing.

    Args:
        m: the mask to check.
        n: the expected number of tokens, or None for any square size.

    Returns:
        `m` itself, unchanged.

    Raises:
        InputError: saying what is wrong (shape, size, dtype, empty rows, missing self-loops)
            and how to fix it.

    Example:
        >>> check_mask(torch.eye(2, dtype=torch.bool)).shape
        torch.Size([2, 2])
    """
    if not isinstance(m, Tensor):
        raise InputError(
            f"a mask must be a torch.Tensor, got {type(m).__name__}; "
            "build one with rankcollapse.masks.from_matrix(...)."
        )
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise InputError(
            f"a mask must be a square (n, n) matrix, got shape {tuple(m.shape)}; "
            "row i = query i, column j = key j."
        )
    if n is not None and m.shape[0] != n:
        raise InputError(
            f"the mask is for {m.shape[0]} tokens (shape {tuple(m.shape)}) but the input has "
            f"{n} tokens; pass a mask of shape ({n}, {n})."
        )
    if m.dtype != torch.bool:
        raise InputError(
            f"a mask must be boolean (True = may attend), got dtype {m.dtype}; "
            "convert it with `m.bool()` or `m != 0`."
        )
    empty = (~m.any(dim=1)).nonzero().flatten()
    if len(empty):
        raise InputError(
            f"token(s) {_listed(empty)} attend to nothing (all-False rows) in a mask of "
            f"{m.shape[0]} tokens; every query needs at least itself: {_FIX}."
        )
    missing = (~m.diagonal()).nonzero().flatten()
    if len(missing):
        raise InputError(
            f"token(s) {_listed(missing)} lack a self-loop (m[i, i] is False) in a mask of "
            f"{m.shape[0]} tokens; every token must see itself: {_FIX}."
        )
    return m
