"""Mask specs: short strings such as "window:1" that name a mask family and its parameters.

A spec string is parsed once, where it enters (`parse_mask_spec`, or a pydantic field typed
`MaskSpec`), into a `MaskSpec`: the canonical spec string itself, which also holds the family
and parameters, so configs, units and results keep strings while code below takes the type
(`spec.build(n)` is the (n, n) mask). `mask_from_spec(spec, n)` builds from a string at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Self

from pydantic_core import core_schema
from torch import Tensor

from rankcollapse.errors import ConfigError, unknown_name
from rankcollapse.masks import families
from rankcollapse.sizes import check_int, check_probability


@dataclass(frozen=True)
class _Family:
    build: Callable[..., Tensor]  # build(n, *params)
    params: tuple[str, ...]  # parameter names, in spec order
    syntax: str
    description: str


_FAMILIES: dict[str, _Family] = {
    "complete": _Family(families.complete, (), "complete", "every token attends to every token"),
    "causal": _Family(families.causal, (), "causal", "token i attends to tokens 0..i"),
    "window": _Family(families.window, ("w",), "window:W", "bidirectional window |i-j| <= W"),
    "causal_window": _Family(
        families.causal_window, ("w",), "causal_window:W", "causal window 0 <= i-j <= W"
    ),
    "sinks": _Family(
        families.sinks,
        ("n_sinks", "w"),
        "sinks:S:W",
        "first S tokens global (attend and attended by all) plus window |i-j| <= W",
    ),
    "dilated": _Family(
        families.dilated,
        ("w", "dilation"),
        "dilated:W:D",
        "|i-j| <= W*D and (i-j) % D == 0",
    ),
    "random": _Family(
        lambda n, p, seed: families.random_sparse(n, p, seed=seed),
        ("p", "seed"),
        "random:P:SEED",
        "each edge with probability P (seeded), plus self-loops",
    ),
}

MASK_FAMILIES: dict[str, str] = {
    name: f"{family.syntax}: {family.description}" for name, family in _FAMILIES.items()
}
"""Mask family name -> one line with the spec syntax and what the mask is (for CLIs)."""


_INT_PARAMS = {  # name -> (lowest allowed value, what it is)
    "w": (0, "window size"),
    "n_sinks": (0, "number of global tokens"),
    "dilation": (1, "stride between attended keys"),
    "seed": (0, "random seed"),
}


def _parse_value(name: str, text: str) -> int | float:
    """One spec parameter: `p` is a probability, every other parameter an integer."""
    if name == "p":
        try:
            return check_probability(name, float(text))
        except ValueError:
            raise ConfigError(f"p must be a probability in [0, 1], got {text!r}.") from None
    low, what = _INT_PARAMS[name]
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(f"{name} must be an integer >= {low}, got {text!r}.") from None
    return check_int(name, value, low=low, what=what)


class MaskSpec(str):
    """A checked mask spec: the family and its parameter values, in spec order.

    It is its canonical spec string (a `str`, e.g. "sinks:1:2" or "random:0.1:7"), so it
    is written, hashed, compared and grouped as that string, in configs, units and results,
    while code below the boundary builds from it: `spec.build(n)` is the (n, n) mask, no parse.

    Example:
        >>> spec = parse_mask_spec("window:01")
        >>> spec, str(spec), spec == "window:1", spec.build(3).sum().item()
        (MaskSpec(family='window', params=(1,)), 'window:1', True, 7)
    """

    family: str
    params: tuple[int | float, ...]

    def __new__(cls, family: str, params: tuple[int | float, ...] = ()) -> Self:
        params = tuple(params)
        spec = super().__new__(cls, ":".join([family, *(repr(value) for value in params)]))
        spec.family, spec.params = family, params
        return spec

    # str's own gives (text,); a spec pickles its family and parameters
    def __getnewargs__(self) -> tuple[str, tuple[int | float, ...]]:  # type: ignore[override]
        return self.family, self.params

    def __repr__(self) -> str:
        return f"MaskSpec(family={self.family!r}, params={self.params!r})"

    def build(self, n: int) -> Tensor:
        """The boolean (n, n) mask of this spec (a method, not a call: pandas calls callables)."""
        return _FAMILIES[self.family].build(n, *self.params)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> core_schema.CoreSchema:
        """A pydantic field typed `MaskSpec` takes a spec string (parsed here, once) or a
        `MaskSpec`, and is dumped as its canonical string (configs, YAML, hashes)."""
        return core_schema.no_info_plain_validator_function(
            as_mask_spec,
            json_schema_input_schema=core_schema.str_schema(),
            serialization=core_schema.plain_serializer_function_ser_schema(str),
        )


def parse_mask_spec(spec: str) -> MaskSpec:
    """Check a mask spec and return the `MaskSpec` it names (`.build(n)` gives the mask).

    Raises:
        UnknownNameError: for an unknown family (the message lists the known ones).
        ConfigError: for a wrong number of parameters or a bad value.

    Example:
        >>> parse_mask_spec("causal_window:1").build(3).int()
        tensor([[1, 0, 0],
                [1, 1, 0],
                [0, 1, 1]], dtype=torch.int32)
    """
    if not isinstance(spec, str):
        raise ConfigError(f"a mask spec must be a string such as 'window:1', got {spec!r}.")
    name, *texts = spec.strip().split(":")
    if name not in _FAMILIES:
        raise unknown_name("mask family", name, _FAMILIES)
    family = _FAMILIES[name]
    if len(texts) != len(family.params):
        wanted = ", ".join(family.params) or "no parameters"
        raise ConfigError(
            f"mask spec {spec!r}: '{name}' takes {len(family.params)} parameter(s) ({wanted}), "
            f"got {len(texts)}; write it as '{family.syntax}'."
        )
    try:
        values = [_parse_value(p, t) for p, t in zip(family.params, texts, strict=True)]
    except ConfigError as err:
        raise ConfigError(f"mask spec {spec!r}: {err} Syntax: '{family.syntax}'.") from None

    return MaskSpec(name, tuple(values))


def as_mask_spec(spec: str | MaskSpec) -> MaskSpec:
    """A `MaskSpec` as it is, a spec string parsed (`parse_mask_spec`)."""
    return spec if isinstance(spec, MaskSpec) else parse_mask_spec(spec)


def mask_from_spec(spec: str, n: int) -> Tensor:
    """The (n, n) mask named by a spec such as "complete", "window:1" or "random:0.1:0".

    Syntax per family: see `MASK_FAMILIES`.

    Example:
        >>> mask_from_spec("window:1", 3).int()
        tensor([[1, 1, 0],
                [1, 1, 1],
                [0, 1, 1]], dtype=torch.int32)
    """
    return parse_mask_spec(spec).build(n)
