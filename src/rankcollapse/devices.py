"""Where tensors run and in which dtype: device and dtype names parsed once, into torch types.

A device is named auto, cpu, cuda, cuda:N, mps or mps:0, on every route (a flag, `--set`, a
config file, a Python call); `device_name` checks the name without importing torch (the
command line's flags). `parse_device("auto")` is the accelerator when one is visible (CUDA,
then Apple's MPS), else the CPU; any other name is checked and returned as a `torch.device`.
`check_visible` checks that a parsed device (its index too) is visible here, and
`resolve_device` does both (where a run starts). In a pydantic config, a field typed `Device`
or `Dtype` takes the name (parsed once, when the config is built) and is written back as the
name, so stored configs and their hashes keep strings. No code path assumes CUDA.

Example:
    >>> resolve_device("cpu")
    device(type='cpu')
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rankcollapse.errors import ConfigError

if TYPE_CHECKING:  # torch and pydantic load on first use: the command line reads the names
    import torch

DEVICES = ("auto", "cpu", "cuda", "mps")
DEVICE_NAMES = "auto, cpu, cuda, cuda:N, mps"  # N: the index of a CUDA device
DEVICE_PATTERN = r"^(auto|cpu|(cuda|mps)(:[0-9]+)?)$"  # an index on an accelerator only
DTYPES = ("float32", "bfloat16", "float16")  # parameter dtypes, by torch's own names


def _available(kind: str) -> bool:
    import torch

    if kind == "cuda":
        return torch.cuda.is_available()
    if kind == "mps":
        return bool(getattr(torch.backends, "mps", None)) and torch.backends.mps.is_available()
    return kind == "cpu"


def _count(kind: str) -> int:
    """How many devices of `kind` are visible here (one CPU, at most one MPS device)."""
    import torch

    if kind == "cuda":
        return torch.cuda.device_count() if _available(kind) else 0
    return int(_available(kind))


def device_name(device: object) -> str:
    """`device` if it names a device: auto, cpu, cuda, cuda:N or mps (torch is not imported: the
    command line checks its flags with this), else a ConfigError saying what is allowed.

    Example:
        >>> device_name("cuda:1")
        'cuda:1'
    """
    import re

    if not isinstance(device, str) or not re.fullmatch(DEVICE_PATTERN, device):
        kind = device.split(":")[0] if isinstance(device, str) else None
        fix = f"use one of {DEVICE_NAMES}"
        if kind in DEVICES:
            fix = f"write {kind!r} alone" if kind in ("auto", "cpu") else "write e.g. 'cuda:0'"
        what = "malformed" if kind in DEVICES else "unknown"
        raise ConfigError(f"device {device!r} is {what}; {fix}.")
    return device


def parse_device(device: str | torch.device = "auto") -> torch.device:
    """The `torch.device` for a name (`device_name`): "auto" picks CUDA, then MPS, then the
    CPU; "cuda:1" keeps its index. Whether the device is visible is `resolve_device`'s check (a
    stored config names the device it ran on, and is read back on machines without it).

    Raises:
        ConfigError: for an unknown or malformed name.
    """
    import torch

    if isinstance(device, torch.device):
        return device
    if device_name(device) == "auto":
        return torch.device(next(k for k in ("cuda", "mps", "cpu") if _available(k)))
    return torch.device(device)


def device_kind(device: str | torch.device = "auto") -> str:
    """cpu, cuda or mps: the kind of `parse_device(device)`. A name other than "auto" is
    answered from the name itself, without importing torch (a runner asks this of every unit).

    Example:
        >>> device_kind("cpu"), device_kind("cuda:1")
        ('cpu', 'cuda')
    """
    kind = device.split(":")[0] if isinstance(device, str) else None
    if kind in DEVICES and kind != "auto":
        return kind
    return parse_device(device).type


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """`parse_device`, then `check_visible`: where a run or probe starts (the command line,
    `probe`, `load_model`). Inner functions take the `torch.device` it returns and check no more.

    Raises:
        ConfigError: for an unknown name or an accelerator that is not visible.
    """
    return check_visible(parse_device(device))


def check_visible(device: torch.device) -> torch.device:
    """`device` (parsed) if it is visible on this machine, its index included, else a
    ConfigError: the one visibility check (`resolve_device`, and a config's devices at
    `Experiment.make_config`)."""
    count = _count(device.type)
    if count and (device.index or 0) < count:
        return device
    if not count:
        raise ConfigError(
            f"device {str(device)!r} is not available on this machine: no {device.type} device "
            "is visible here; use 'cpu' or 'auto'."
        )
    visible = ", ".join(f"{device.type}:{i}" for i in range(count))
    raise ConfigError(
        f"device {str(device)!r} is not visible here: this machine shows {count} "
        f"{device.type} device(s) ({visible}); use one of those, 'cpu' or 'auto'."
    )


def resolve_dtype(dtype: str | torch.dtype, *, float64: bool = False) -> torch.dtype:
    """A parameter dtype by name: float32, bfloat16 or float16, and float64 where `float64`
    (exact decompositions); a torch.dtype passes through.

    Example:
        >>> resolve_dtype("bfloat16"), resolve_dtype("float64", float64=True)
        (torch.bfloat16, torch.float64)
    """
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    known = ("float64", *DTYPES) if float64 else DTYPES
    if not isinstance(dtype, str) or dtype not in known:
        raise ConfigError(f"dtype {dtype!r} is unknown; use one of {', '.join(known)}.")
    return getattr(torch, dtype)


def dtype_name(dtype: torch.dtype) -> str:
    """The name `resolve_dtype` reads back: torch.bfloat16 -> "bfloat16"."""
    return str(dtype).removeprefix("torch.")


def _config_type(parse: Any, name: Any, schema: dict[str, Any]) -> Any:
    """A pydantic field type: given as a name (parsed once, by `parse`), held as what `parse`
    returns, dumped as its name (so stored configs and their hashes keep strings)."""
    from typing import Annotated

    from pydantic import PlainSerializer, PlainValidator, WithJsonSchema

    schema = {"type": "string", **schema}
    return Annotated[Any, PlainValidator(parse), PlainSerializer(name), WithJsonSchema(schema)]


def __getattr__(name: str) -> Any:
    """`Device` and `Dtype`, built on first use (pydantic loads then, not at start-up):
    `Device` holds a device given by name (auto, cpu, cuda, cuda:N, mps) as a `torch.device`;
    `Dtype` a parameter dtype of `DTYPES` as a `torch.dtype`."""
    if name == "Device":
        return _config_type(parse_device, str, {"pattern": DEVICE_PATTERN})
    if name == "Dtype":
        return _config_type(resolve_dtype, dtype_name, {"enum": list(DTYPES)})
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def metrics_device(device: torch.device) -> torch.device:
    """Where float64 metrics run: the device itself, except MPS (no float64) -> the CPU."""
    import torch

    return torch.device("cpu") if device.type == "mps" else device
