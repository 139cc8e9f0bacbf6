"""Where tensors live: one resolution of the `device` option for every model and run."""

from __future__ import annotations

from typing import Literal

import torch

from rankcollapse.errors import ConfigError

DeviceName = Literal["auto", "cpu", "cuda", "mps"]
DEVICES: tuple[str, ...] = ("auto", "cpu", "cuda", "mps")


def resolve_device(name: str = "auto") -> torch.device:
    """`auto`: an accelerator when one is visible (CUDA, then Apple MPS), else the CPU.

    A named accelerator that is not there is a clear error, never a silent fallback.

    Example:
        >>> resolve_device("cpu")
        device(type='cpu')
    """
    if name not in DEVICES:
        raise ConfigError(f"device {name!r} is not one of {', '.join(DEVICES)}.")
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device 'cuda' was asked for but torch sees no CUDA device; use cpu.")
    if name == "mps" and not torch.backends.mps.is_available():
        raise ConfigError("device 'mps' was asked for but torch sees no MPS device; use cpu.")
    return torch.device(name)
