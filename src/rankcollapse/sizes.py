"""Sizes and scalars, checked in one place: one bound per quantity wherever it enters (a CLI
flag, `run X --set`, a YAML file, a Python call), and the memory a set of sizes would take,
checked before anything is allocated.

The bounds are wide enough for every preset and every model of the registry; what they let
through can still be too big for this machine, which `check_memory` says (with the size and
the memory it needs) before the first tensor is made.

A config field takes a size by its type (`NLayers`, `NHeads`, `DModel`, `NTokens`, `NSamples`,
`BatchSize`, `NPaths`), alone or inside `list[...]`; an experiment that needs less narrows
it (`NTokens = Field(128, ge=4)`), never widens it. `check_size` is the same bound for a value
that enters outside a config (a flag, a model folder's config.json, a random init's depth).

Example:
    >>> from pydantic import TypeAdapter
    >>> TypeAdapter(list[NLayers]).validate_python([1, 3])
    [1, 3]
"""

from __future__ import annotations

import math
import types
from dataclasses import dataclass
from typing import Annotated, Any

from rankcollapse.errors import ConfigError


@dataclass(frozen=True)
class Bound:
    """The allowed values of one size, `low` to `high` inclusive, and what it counts."""

    low: int
    high: int
    doc: str

    def __str__(self) -> str:
        return f"{self.low}..{self.high}"


# One bound per quantity, in the one vocabulary.
SIZES = {
    "n_layers": Bound(1, 4096, "Number of layers (of a toy network, a random init or a model folder)."),
    "n_heads": Bound(1, 4096, "Attention heads per layer (Amsel et al.: up to 512 low-rank heads)."),
    "d_model": Bound(1, 16384, "Token width."),
    "n_tokens": Bound(2, 16384, "Tokens per sequence."),
    "n_samples": Bound(1, 65536, "Input sequences."),
    "batch_size": Bound(1, 65536, "Sequences per forward pass."),
    "n_paths": Bound(1, 100_000, "Sampled paths per length."),
}  # fmt: skip


@dataclass(frozen=True)
class Size:
    """The metadata of a size type: a pydantic field typed `Annotated[int, Size("n_layers")]`
    takes integers within `SIZES["n_layers"]` (the JSON schema says so too). Pydantic is not
    imported here: it calls this hook when it builds a config."""

    name: str

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        bound, schema = SIZES[self.name], handler(source)
        low, high = schema.get("ge", bound.low), schema.get("le", bound.high)  # a field's own
        return {**schema, "ge": max(low, bound.low), "le": min(high, bound.high)}


def field_bounds(annotation: Any, metadata: Any = ()) -> tuple[int | None, int | None]:
    """(lowest, highest) value a pydantic field takes, from its size type (`Size`, also inside
    `X | None`) and its own ge/le; None where it has no bound (help texts show the range).

    Example:
        >>> field_bounds(NTokens | None)
        (2, 16384)
    """
    import typing

    found, todo = [*metadata], [annotation]
    while todo:
        kind = todo.pop()
        if typing.get_origin(kind) is Annotated:
            found += kind.__metadata__
            todo.append(kind.__origin__)
        elif typing.get_origin(kind) in (typing.Union, types.UnionType):
            todo += typing.get_args(kind)
    sizes = [SIZES[m.name] for m in found if isinstance(m, Size)]
    lows = [m.ge for m in found if hasattr(m, "ge")] + [b.low for b in sizes]
    highs = [m.le for m in found if hasattr(m, "le")] + [b.high for b in sizes]
    return max(lows, default=None), min(highs, default=None)


# The one type of each size; a field narrows it with Field(ge=..., le=...), never widens it.
NLayers = Annotated[int, Size("n_layers")]
NHeads = Annotated[int, Size("n_heads")]
DModel = Annotated[int, Size("d_model")]
NTokens = Annotated[int, Size("n_tokens")]
NSamples = Annotated[int, Size("n_samples")]
BatchSize = Annotated[int, Size("batch_size")]
NPaths = Annotated[int, Size("n_paths")]

SHARE = 0.75  # of the available memory, the most one command's estimate may ask for


def bounds_text(*names: str) -> str:
    """'n_layers 1..4096, n_heads 1..4096' for help texts (every size when none is named)."""
    return ", ".join(f"{name} {SIZES[name]}" for name in names or SIZES)


def check_int(name: str, value: object, *, low: int, high: int | None = None, what: str) -> int:
    """`value` as an int in [low, high] (no upper end when `high` is None), or a ConfigError
    naming the parameter, what it counts and the allowed range.

    Example:
        >>> check_int("w", 3, low=0, what="window half-width")
        3
    """
    ok = isinstance(value, int) and not isinstance(value, bool)
    if not isinstance(value, int) or not ok or value < low or (high is not None and value > high):
        allowed = f">= {low}" if high is None else f"from {low} to {high}"
        raise ConfigError(f"{name} must be an integer {allowed} ({what}), got {value!r}.")
    return value


def check_probability(name: str, value: object) -> float:
    """`value` as a float in [0, 1], or a ConfigError naming the parameter."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ConfigError(f"{name} must be a probability in [0, 1], got {value!r}.")
    return float(value)


def check_size(
    name: str, value: object, *, shown: str | None = None, needs: float | None = None
) -> int:
    """`value` within the bound of size `name` (`SIZES`), else a ConfigError naming it as
    `shown` (a flag such as '--n-layers'; default the size's own name), the bound and, where
    `needs` is given and the value is above the bound, the bytes it would take.

    Example:
        >>> check_size("n_heads", 4)
        4
    """
    bound = SIZES[name]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{shown or name} is {value!r}; it must be an integer ({bound}).")
    if not bound.low <= value <= bound.high:
        what = bound.doc.split(" (")[0].rstrip(".").lower()
        memory = ""
        if needs is not None and value > bound.high:
            memory = f"; it would need about {gigabytes(needs)} of memory"
        raise ConfigError(
            f"{shown or name} is {value}; it must be at least {bound.low} and at most "
            f"{bound.high} ({what}){memory}."
        )
    return value


def gigabytes(n_bytes: float) -> str:
    """'350 MB', '2.1 GB', '120,000 GB': a byte count for a message.

    Example:
        >>> gigabytes(3.5e8), gigabytes(2.1e9), gigabytes(1.2e14)
        ('350 MB', '2.1 GB', '120,000 GB')
    """
    if n_bytes < 1e9:
        return f"{n_bytes / 1e6:.0f} MB"
    return f"{n_bytes / 1e9:.2g} GB" if n_bytes < 1e10 else f"{n_bytes / 1e9:,.0f} GB"


def check_memory(what: str, needed: float, sizes: dict[str, int], fix: str) -> None:
    """Refuse, before anything is allocated, work whose estimated memory `needed` (bytes, from
    the sizes) is more than `SHARE` of what this machine has available
    (`process.available_memory`; the estimate is rough and other processes run too): a
    ConfigError naming the sizes, the memory needed and `fix`.

    Example:
        >>> check_memory("a toy run", 1e3, {"n_layers": 2}, "lower --n-layers")
    """
    from rankcollapse.process import available_memory

    available = available_memory()
    if math.isfinite(needed) and needed <= SHARE * available:
        return
    given = ", ".join(f"{name}={value:,}" for name, value in sizes.items())
    raise ConfigError(
        f"{what} with {given} needs about {gigabytes(needed)} of memory, more than the "
        f"{gigabytes(SHARE * available)} one command may take here ({SHARE:.0%} of the "
        f"{gigabytes(available)} available); {fix}. Nothing was allocated."
    )


def toy_bytes(
    *,
    n_layers: int,
    n_heads: int,
    d_model: int,
    n_samples: int,
    n_tokens: int,
    d_mlp: int = 0,
    itemsize: int = 8,
    shared_weights: bool = False,
    keep_attention: bool = False,
) -> int:
    """Bytes a forward pass of a toy network keeps: its weights (Q, K, V, O of d_model^2 each
    and an MLP of 2 d_model d_mlp per layer), its n_layers + 1 states (n_samples, n_tokens,
    d_model) and the attention matrices of one layer (of every layer with `keep_attention`).

    Example:
        >>> toy_bytes(n_layers=1, n_heads=1, d_model=2, n_samples=1, n_tokens=2)
        224
    """
    weights = (1 if shared_weights else n_layers) * (4 * d_model**2 + 2 * d_model * d_mlp)
    states = (n_layers + 1) * n_samples * n_tokens * d_model
    attention = (n_layers if keep_attention else 1) * n_samples * n_heads * n_tokens**2
    return itemsize * (weights + states + attention)


def measure_bytes(n_samples: int, n_tokens: int, d_model: int) -> int:
    """Bytes the metric suite takes on one layer: the states in float64 (twice: centred and
    not) and one Gram matrix per sequence.

    Example:
        >>> measure_bytes(1, 2, 3)
        128
    """
    return 8 * n_samples * n_tokens * (2 * d_model + n_tokens)
