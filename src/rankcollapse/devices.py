"""Where tensors run and in which dtype: device and dtype names parsed once, into torch types.

`parse_device("auto")` is the accelerator when one is visible (CUDA, then Apple's MPS), else
the CPU; any other name is checked and returned as a `torch.device`. `resolve_device` also
checks that the device is visible here (where a run starts). In a pydantic config, a field
typed `Device` or `Dtype` takes the name (parsed once, when the config is built) and is
written back as the name, so stored configs and their hashes keep strings. No code path
assumes CUDA.

Example:
    >>> resolve_device("cpu")
    device(type='cpu')
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any

import torch
from pydantic import PlainSerializer, PlainValidator, WithJsonSchema

from rankcollapse.errors import ConfigError

DEVICES = ("auto", "cpu", "cuda", "mps")
CPU = torch.device("cpu")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _available(kind: str) -> bool:
    if kind == "cuda":
        return torch.cuda.is_available()
    if kind == "mps":
        return bool(getattr(torch.backends, "mps", None)) and torch.backends.mps.is_available()
    return kind == "cpu"


def parse_device(device: str | torch.device = "auto") -> torch.device:
    """The `torch.device` for a name: "auto" picks CUDA, then MPS, then the CPU; "cuda:1" keeps
    its index. Whether the device is visible is `resolve_device`'s check (a stored config names
    the device it ran on, and is read back on machines without it).

    Raises:
        ConfigError: for an unknown name.
    """
    if isinstance(device, torch.device):
        return device
    kind = device.split(":")[0] if isinstance(device, str) else None
    if kind not in DEVICES:
        raise ConfigError(f"device {device!r} is unknown; use one of {', '.join(DEVICES)}.")
    if kind == "auto":
        return torch.device(next(k for k in ("cuda", "mps", "cpu") if _available(k)))
    try:
        return torch.device(device)
    except RuntimeError:
        raise ConfigError(
            f"device {device!r} is malformed; write e.g. 'cuda' or 'cuda:0'."
        ) from None


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """`parse_device`, then checked to be visible on this machine: where a run or probe starts.

    Raises:
        ConfigError: for an unknown name or an accelerator that is not visible.
    """
    device = parse_device(device)
    if not _available(device.type):
        raise ConfigError(
            f"device {str(device)!r} is not available on this machine; use 'cpu' or 'auto'."
        )
    return device


def resolve_dtype(dtype: str | torch.dtype, *, float64: bool = False) -> torch.dtype:
    """A parameter dtype by name: float32, bfloat16 or float16, and float64 where `float64`
    (exact decompositions); a torch.dtype passes through.

    Example:
        >>> resolve_dtype("bfloat16"), resolve_dtype("float64", float64=True)
        (torch.bfloat16, torch.float64)
    """
    if isinstance(dtype, torch.dtype):
        return dtype
    known = {"float64": torch.float64, **DTYPES} if float64 else DTYPES
    if not isinstance(dtype, str) or dtype not in known:
        raise ConfigError(f"dtype {dtype!r} is unknown; use one of {', '.join(known)}.")
    return known[dtype]


def dtype_name(dtype: torch.dtype) -> str:
    """The name `resolve_dtype` reads back: torch.bfloat16 -> "bfloat16"."""
    return str(dtype).removeprefix("torch.")


def _config_type(kind: type, parse: Any, name: Any, names: Iterable[str]) -> Any:
    """A pydantic field type: given as a name (parsed once, by `parse`), held as `kind`,
    dumped as its name (so stored configs and their hashes keep strings)."""
    schema = {"type": "string", "enum": list(names)}
    return Annotated[kind, PlainValidator(parse), PlainSerializer(name), WithJsonSchema(schema)]


Device = _config_type(torch.device, parse_device, str, DEVICES)
"""A config field holding a device: a name (cpu, cuda, mps, auto), held as a `torch.device`."""

Dtype = _config_type(torch.dtype, resolve_dtype, dtype_name, DTYPES)
"""A config field holding a parameter dtype: a name of `DTYPES`, held as a `torch.dtype`."""


def metrics_device(device: torch.device) -> torch.device:
    """Where float64 metrics run: the device itself, except MPS (no float64) -> the CPU."""
    return torch.device("cpu") if device.type == "mps" else device
