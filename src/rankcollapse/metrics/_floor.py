"""The floor of a dtype: the rule, defined once, for when a value is rounding noise.

A relative quantity (a residual divided by the state's own norm, or sigma_min / sigma_max)
sits at the floor of the dtype that produced the activations when it is at most
FLOOR_FACTOR x eps(dtype): about 1.2e-6 for float32 and 2.2e-15 for float64. Below that the
"signal" is what rounding left behind, and plots must not read it as collapse speed.

So does every vanishing quantity of a state whose entries are so small that underflow, not
rounding, decides its arithmetic: its root mean square entry below tiny / eps of that dtype
(`underflowing`; tiny is the smallest normal number, so 9.9e-32 for float32 and 1.0e-292 for
float64). A result below tiny is subnormal or flushed to 0, an absolute error of up to tiny,
which exceeds the relative rounding error eps of values below tiny / eps; the state's products
with weights and its attention scores underflow first. Measured: a 128-layer random-init BERT
without skips or norms (float32, causal mask, subnormals flushed) shrinks its states about 3x
per layer; its mu_rel sits at the rounding floor (5e-7) up to layer 64, where the root mean
square entry is 2e-33, then climbs to 0.75 by layer 72 (1e-37): underflow noise, read as signal
by any rule that waits for the entries themselves to leave the normal range.
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


def underflowing(rms: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """True where a state's root mean square entry `rms` is below tiny / eps of `dtype`, the
    dtype that produced it (module doc): underflow, not rounding, decides its arithmetic.

    Example:
        >>> underflowing(torch.tensor([1e-33, 1e-30]), torch.float32).tolist()
        [True, False]
    """
    info = torch.finfo(dtype)
    return rms < info.tiny / info.eps
