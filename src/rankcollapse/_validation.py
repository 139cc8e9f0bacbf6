"""Input checks shared by every layer: hidden states, token masks, attention matrices.

Each check lives here once and runs at the boundary, before any work starts. The checked
tensors come back in float64 with padding entries set to exactly 0, so that pads can never
enter a statistic (not even a NaN sitting in a pad).
"""

from __future__ import annotations

import contextlib

import torch
from torch import Tensor

from rankcollapse.errors import InputError, NonFiniteError

MIN_TOKENS = 2


def _shape(t: Tensor | torch.Size | tuple) -> tuple[int, ...]:
    return tuple(t.shape) if isinstance(t, Tensor) else tuple(t)


def _sample(batch_index: tuple[int, ...]) -> str:
    """'sample 3' for one batch dimension, 'sample (1, 3)' for several, '' for none."""
    if not batch_index:
        return ""
    shown = batch_index[0] if len(batch_index) == 1 else batch_index
    return f"sample {shown}, "


def _check_float(t: object, name: str, what: str) -> Tensor:
    if not isinstance(t, Tensor):
        raise InputError(
            f"{name} must be a torch.Tensor, got {type(t).__name__}; "
            f"convert it with torch.as_tensor({name})."
        )
    if not t.is_floating_point():
        raise InputError(
            f"{name} has dtype {t.dtype}; {what} must be a floating-point tensor; "
            f"convert it with {name}.float()."
        )
    return t


def check_mask_shape(
    mask: Tensor | None, shape: tuple[int, ...], name: str, full: Tensor
) -> Tensor:
    """A boolean token mask of exactly `shape` (all True when `mask` is None).

    Integer masks holding only 0 and 1 (as Hugging Face `attention_mask`) are accepted.
    """
    if mask is None:
        return torch.ones(shape, dtype=torch.bool, device=full.device)
    if not isinstance(mask, Tensor):
        raise InputError(
            f"mask must be a torch.Tensor, got {type(mask).__name__}; "
            f"pass a boolean tensor of shape {shape}."
        )
    if _shape(mask) != shape:
        raise InputError(
            f"mask has shape {_shape(mask)} but {name} has {shape[-1]} tokens "
            f"({name}.shape={_shape(full)}); pass a boolean mask of shape {shape}."
        )
    return boolean_mask(mask)


def boolean_mask(mask: Tensor) -> Tensor:
    """A token mask as bool: booleans as they are, integers that are all 0 or 1 converted;
    floats (0.5, NaN) are refused, never rounded.

    Example:
        >>> boolean_mask(torch.tensor([1, 0])).tolist()
        [True, False]
    """
    if mask.dtype == torch.bool:
        return mask
    if mask.is_floating_point() or mask.is_complex() or not bool(((mask == 0) | (mask == 1)).all()):
        raise InputError(
            f"mask has dtype {mask.dtype} (values other than 0/1 or not integer); pass a boolean "
            "mask, True = real token, e.g. `attention_mask.bool()`."
        )
    return mask.bool()


def _check_enough_tokens(mask: Tensor, name: str, full: Tensor) -> None:
    n_real = mask.sum(-1)
    too_short = n_real < MIN_TOKENS
    if not bool(too_short.any()):
        return
    if mask.all():
        raise InputError(
            f"{name} has {mask.shape[-1]} token(s) per sequence ({name}.shape={_shape(full)}); "
            f"metrics need at least {MIN_TOKENS} tokens per sequence."
        )
    where = tuple(int(i) for i in too_short.nonzero()[0])
    count = int(too_short.sum())
    sequence = _sample(where).rstrip(", ") or "the sequence"
    raise InputError(
        f"{name} has {int(n_real[where])} real token(s) in {sequence}"
        f" ({count} sequence(s) have fewer than {MIN_TOKENS}); metrics need at least "
        f"{MIN_TOKENS} real tokens per sequence; drop those sequences or check the mask."
    )


def _check_finite(t: Tensor, keep: Tensor, name: str, what: str, unit: str) -> None:
    """Reject NaN/Inf where `keep` (broadcastable to t) is True; say how many and where first."""
    bad = ~torch.isfinite(t) & keep
    if not bool(bad.any()):
        return
    n_nan = int((torch.isnan(t) & keep).sum())
    n_inf = int(bad.sum()) - n_nan
    counts = " and ".join(
        f"{count} {kind}" for count, kind in ((n_nan, "NaN"), (n_inf, "Inf")) if count
    )
    first = tuple(int(i) for i in bad.nonzero()[0])
    batch, token = first[: t.ndim - 2], first[t.ndim - 2]
    raise NonFiniteError(
        f"{name} has {counts} value(s) (first: {_sample(batch)}{unit} {token}); "
        f"metrics need finite {what}."
    )


def check_token_shapes(
    x: Tensor, mask: Tensor | None = None, *, name: str = "x", counts: bool = True
) -> tuple[Tensor, Tensor]:
    """Every check of `check_tokens` but finiteness, without a pass over the values of x.

    For code that converts x itself, chunk by chunk, and tests finiteness on the way (a finite
    float64 sum of squares means finite values); it must call `check_tokens` on the whole
    input when that test fails, so that the error names the sample. With `counts` False the
    count of real tokens per sequence (a read of the mask's values) is left to the caller, who
    must call this again with `counts` True when some sequence has fewer than 2.

    Returns:
        (x unchanged, boolean mask of shape (..., n)).

    Example:
        >>> x, mask = check_token_shapes(torch.ones(2, 3, 4), torch.tensor([[1, 1, 0], [1, 1, 1]]))
        >>> x.dtype, mask.dtype
        (torch.float32, torch.bool)
    """
    x = _check_float(x, name, "hidden states")
    if x.ndim < 2:
        raise InputError(
            f"{name} has shape {_shape(x)}; hidden states need shape (..., n, d), tokens as rows."
        )
    if x.shape[-1] == 0:
        raise InputError(
            f"{name} has d = 0 features ({name}.shape={_shape(x)}); metrics need at least one "
            "feature per token."
        )
    mask = check_mask_shape(mask, _shape(x)[:-1], name, x)
    if counts:
        _check_enough_tokens(mask, name, x)
    return x, mask


def check_tokens(
    x: Tensor, mask: Tensor | None = None, *, name: str = "x"
) -> tuple[Tensor, Tensor]:
    """Check hidden states and their token mask.

    Args:
        x: hidden states, shape (..., n, d), any float dtype.
        mask: True for real tokens, shape (..., n), bool (or 0/1 integers); None = all real.
        name: what to call `x` in error messages.

    Returns:
        (x as float64 with pad rows set to 0, boolean mask of shape (..., n)).

    Raises:
        InputError: not a float tensor, fewer than 2 dimensions, d = 0, wrong mask shape,
            NaN/Inf in a real token, or fewer than 2 real tokens in a sequence.

    Example:
        >>> x, mask = check_tokens(torch.ones(2, 3, 4), torch.tensor([[1, 1, 0], [1, 1, 1]]))
        >>> x.dtype, x[0, 2].tolist(), mask.dtype
        (torch.float64, [0.0, 0.0, 0.0, 0.0], torch.bool)
    """
    x, mask = check_token_shapes(x, mask, name=name)
    x = x.to(torch.float64)
    # One fused pass decides the common case: a float64 sum of finite values stays finite.
    if not bool(torch.isfinite(x.sum())):
        _check_finite(x, mask.unsqueeze(-1), name, "hidden states", "token")
    if not bool(mask.all()):
        x = x.masked_fill(~mask.unsqueeze(-1), 0.0)
    return x, mask


def check_attention(
    a: Tensor, mask: Tensor | None = None, edges: Tensor | None = None, *, name: str = "a"
) -> tuple[Tensor, Tensor, Tensor]:
    """Check row-stochastic attention matrices, their token mask and the allowed edges.

    Args:
        a: attention, shape (..., n, n), row i = query i, rows sum to 1, any float dtype.
        mask: True for real tokens, shape (..., n) matching a.shape[:-1] (for per-head
            attention (b, h, n, n) pass `mask[:, None, :]`); None = all real.
        edges: allowed edges, boolean, `edges[..., i, j]` True iff query i may attend to key j,
            broadcastable to a.shape (e.g. (n, n)); None = every pair of real tokens.

    Returns:
        (a as float64 with entries of pad queries and pad keys set to 0, boolean mask
        broadcast to a.shape[:-1], boolean allowed-edge mask of shape a.shape restricted
        to real query and key pairs).

    Raises:
        InputError: not a float tensor, not square, wrong mask or edge shape, NaN/Inf or
            negative weights or rows not summing to 1 over real keys, fewer than 2 real
            tokens, or a real query with no allowed real key.

    Example:
        >>> a, mask, edges = check_attention(torch.full((3, 3), 1 / 3))
        >>> a.dtype, mask.tolist(), bool(edges.all())
        (torch.float64, [True, True, True], True)
    """
    a = _check_float(a, name, "attention matrices")
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise InputError(
            f"{name} has shape {_shape(a)}; attention needs shape (..., n, n), row i = query i."
        )
    shape = _shape(a)[:-1]
    if mask is not None and isinstance(mask, Tensor) and mask.ndim == len(shape):
        with contextlib.suppress(RuntimeError):  # reported with the full shape message below
            mask = mask.expand(shape)
    mask = check_mask_shape(mask, shape, name, a)
    _check_enough_tokens(mask, name, a)
    pairs = mask.unsqueeze(-1) & mask.unsqueeze(-2)  # (..., n, n) real query and real key
    _check_finite(a, pairs, name, "attention weights", "query")
    # Rounding of a softmax in the source dtype (float16/bfloat16 rows drift by ~eps).
    tol = max(1e-4, 4 * torch.finfo(a.dtype).eps)
    a = a.to(torch.float64).masked_fill(~pairs, 0.0)
    if bool((a < 0).any()):
        raise InputError(
            f"{name} has {int((a < 0).sum())} negative weight(s) (smallest {float(a.min()):.3g}); "
            "attention rows must be probability distributions (softmax outputs)."
        )
    row_sums = a.sum(-1)  # (..., n) over real keys
    off = ((row_sums - 1).abs() > tol) & mask
    if bool(off.any()):
        where = tuple(int(i) for i in off.nonzero()[0])
        first = f"{_sample(where[:-1])}query {where[-1]} sums to {float(row_sums[where]):.6g}"
        raise InputError(
            f"{name} has {int(off.sum())} real query row(s) not summing to 1 over the real keys "
            f"(first: {first}); "
            "attention rows must sum to 1; check that the mask is the one the model used."
        )
    allowed = _allowed_edges(edges, pairs, name, a)
    empty = ~allowed.any(-1) & mask
    if bool(empty.any()):
        where = tuple(int(i) for i in empty.nonzero()[0])
        raise InputError(
            f"edges allow no real key for {int(empty.sum())} real query row(s) (first: "
            f"{_sample(where[:-1])}query {where[-1]}); every query needs at least one allowed "
            "key: add self-loops with `edges | torch.eye(n, dtype=torch.bool)`."
        )
    return a, mask, allowed


def _allowed_edges(edges: Tensor | None, pairs: Tensor, name: str, a: Tensor) -> Tensor:
    if edges is None:
        return pairs
    if not isinstance(edges, Tensor) or edges.dtype != torch.bool:
        kind = edges.dtype if isinstance(edges, Tensor) else type(edges).__name__
        raise InputError(
            f"edges has dtype {kind}; pass a boolean (n, n) mask, True = query i may attend "
            "to key j (e.g. from rankcollapse.masks)."
        )
    try:
        allowed = edges.expand(pairs.shape) & pairs
    except RuntimeError:
        raise InputError(
            f"edges has shape {_shape(edges)} but {name}.shape={_shape(a)}; pass edges of shape "
            f"({a.shape[-1]}, {a.shape[-1]}) or broadcastable to {_shape(a)}."
        ) from None
    return allowed
