"""Where tensors run: one place that turns `device="auto"` into a real device.

`resolve_device("auto")` is the accelerator when one is visible (CUDA, then Apple's MPS), else
the CPU; any other name is checked and returned as a `torch.device`. No code path assumes CUDA.

Example:
    >>> resolve_device("cpu")
    device(type='cpu')
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from rankcollapse.errors import ConfigError

if TYPE_CHECKING:  # torch loads on first use: the command line reads the names at start-up
    import torch

DeviceName = Literal["auto", "cpu", "cuda", "mps"]
DEVICES = ("auto", "cpu", "cuda", "mps")
DTYPES = ("float32", "bfloat16", "float16")  # parameter dtypes, by torch's own names


def _available(kind: str) -> bool:
    import torch

    if kind == "cuda":
        return torch.cuda.is_available()
    if kind == "mps":
        return bool(getattr(torch.backends, "mps", None)) and torch.backends.mps.is_available()
    return kind == "cpu"


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """The `torch.device` for a name: "auto" picks CUDA, then MPS, then the CPU.

    Raises:
        ConfigError: for an unknown name or an accelerator that is not visible.
    """
    import torch

    if isinstance(device, torch.device):
        return device
    kind = device.split(":")[0]
    if kind not in DEVICES:
        raise ConfigError(f"device {device!r} is unknown; use one of {', '.join(DEVICES)}.")
    if kind == "auto":
        return torch.device(next(k for k in ("cuda", "mps", "cpu") if _available(k)))
    if not _available(kind):
        raise ConfigError(
            f"device {device!r} is not available on this machine; use 'cpu' or 'auto'."
        )
    return torch.device(device)


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """A parameter dtype by name: float32, bfloat16 or float16 (a torch.dtype passes through).

    Example:
        >>> resolve_dtype("bfloat16")
        torch.bfloat16
    """
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPES:
        raise ConfigError(f"dtype {dtype!r} is unknown; use one of {', '.join(DTYPES)}.")
    return getattr(torch, dtype)


def metrics_device(device: torch.device) -> torch.device:
    """Where float64 metrics run: the device itself, except MPS (no float64) -> the CPU."""
    import torch

    return torch.device("cpu") if device.type == "mps" else device
