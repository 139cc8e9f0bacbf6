"""The floor of a dtype: the rule, defined once, for when a value is rounding noise.

A relative quantity (a residual divided by the state's own norm, or sigma_min / sigma_max)
sits at the floor of the dtype that produced the activations when it is at most
FLOOR_FACTOR x eps(dtype): about 1.2e-6 for float32 and 2.2e-15 for float64. Below that the
"signal" is what rounding left behind, and plots must not read it as collapse speed.

So does every vanishing quantity of a state whose entries have underflowed: its root mean
square entry below the dtype's smallest normal number (`below_normal`; 1.2e-38 for float32).
Such entries are subnormal, with fewer significant bits the smaller they are, or flushed to 0;
a pure attention stack at random init shrinks its states that far (a 128-layer BERT without
skips or norms: about 3x per layer, 1e-36 by layer 70), after which mu_rel computed from them
reads anything from 0 to 1. The layers just before are not caught by any rule on the state
alone: their products with the weights already underflow.
"""

from __future__ import annotations

import torch

from rankcollapse.errors import InputError

FLOOR_FACTOR = 10.0


def dtype_floor(dtype: torch.dtype) -> float:
    """FLOOR_FACTOR x machine epsilon of `dtype`.

    Example:
        >>> dtype_floor(torch.float64) == 10 * torch.finfo(torch.float64).eps
        True
    """
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise InputError(
            f"source_dtype is {dtype!r}; pass the floating dtype that produced the activations, "
            "e.g. torch.float32."
        )
    return FLOOR_FACTOR * torch.finfo(dtype).eps


def below_normal(rms: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """True where a state's root mean square entry `rms` is below the smallest normal number
    of `dtype`, the dtype that produced it: its entries are subnormal or zero.

    Example:
        >>> below_normal(torch.tensor([1e-39, 1e-30]), torch.float32).tolist()
        [True, False]
    """
    return rms < torch.finfo(dtype).tiny
