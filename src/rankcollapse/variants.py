"""The variant vocabulary: the names of `rankcollapse variants`, for toy and real models alike.

A variant says which parts of every block stay on: the attention skip, the MLP block, the
norms. Three sets, one table here (`VARIANTS`); how each is realised is `rankcollapse.hf.variants`
(real models, by hooks) and `rankcollapse.nets.variants` (the toy network):

| set                  | names                                               |
|----------------------|-----------------------------------------------------|
| Dong et al. 2021     | san, san+mlp, san+skip, transformer                 |
| Wu et al. 2024       | wu:san, wu:san+skip, wu:san+ln, wu:san+skip+ln, ... |
| the authors' surgery | dong-authors:san, ... (Dong et al.'s own code)      |

A name is parsed once, where it enters (`parse_variant`, or a pydantic field typed `Variant`
or `variant_type(...)`), into a `Variant`: the canonical name itself (a `str`), which also holds
its set and parts, so configs, units and results keep strings while code below takes the type.
A field of one set may take names within that set (`variant_type("wu", short=True)`: "san+ln"
is `wu:san+ln`, written back as "san+ln"), so stored configs and their hashes keep the names
they were written with. Nothing here imports torch or pydantic at import time.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal, Self

from rankcollapse.errors import ConfigError, unknown_name

if TYPE_CHECKING:
    from pydantic_core import core_schema

Family = Literal["dong", "wu", "dong-authors"]
PREFIX: dict[Family, str] = {"dong": "", "wu": "wu:", "dong-authors": "dong-authors:"}
"""Each set's name prefix (Dong's names have none; "dong:san" is accepted for "san")."""


class Variant(str):
    """A checked variant: its canonical name (a `str`, e.g. "wu:san+ln"), its set and which
    parts of every block stay on.

    It is written, hashed, compared and grouped as its name, in configs, units and results.

    Example:
        >>> v = parse_variant("wu:san+ln")
        >>> v, v == "wu:san+ln", v.short, (v.attention_skip, v.mlp, v.norms)
        (Variant('wu:san+ln'), True, 'san+ln', (False, False, True))
    """

    family: Family
    attention_skip: bool
    mlp: bool
    norms: bool

    def __new__(
        cls, name: str, family: Family, *, attention_skip: bool, mlp: bool, norms: bool
    ) -> Self:
        variant = super().__new__(cls, name)
        variant.family = family
        variant.attention_skip, variant.mlp, variant.norms = attention_skip, mlp, norms
        return variant

    def __getnewargs_ex__(self) -> tuple[tuple[str, str], dict[str, bool]]:
        parts = {"attention_skip": self.attention_skip, "mlp": self.mlp, "norms": self.norms}
        return (str(self), self.family), parts

    def __repr__(self) -> str:
        return f"Variant({str(self)!r})"

    @property
    def name(self) -> str:
        """The canonical name, as a plain string."""
        return str(self)

    @property
    def short(self) -> str:
        """The name within its set: "wu:san+ln" -> "san+ln" (how one set's results name it)."""
        return str(self).removeprefix(PREFIX[self.family])

    @property
    def is_identity(self) -> bool:
        """Every part kept: the unchanged model."""
        return self.attention_skip and self.mlp and self.norms

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> core_schema.CoreSchema:
        """A pydantic field typed `Variant` takes any name of `VARIANTS` (parsed here, once) or
        a `Variant`, and is dumped as its name (configs, YAML, hashes)."""
        from pydantic_core import core_schema

        return core_schema.no_info_plain_validator_function(
            parse_variant,
            json_schema_input_schema=core_schema.str_schema(),
            serialization=core_schema.plain_serializer_function_ser_schema(str),
        )


def _set(family: Family, *parts: tuple[str, bool, bool, bool]) -> list[Variant]:
    return [
        Variant(PREFIX[family] + short, family, attention_skip=skip, mlp=mlp, norms=norms)
        for short, skip, mlp, norms in parts
    ]


# name within the set, attention skip, MLP block, norms (kept = True)
DONG_PARTS = (
    ("san", False, False, True),
    ("san+mlp", False, True, True),
    ("san+skip", True, False, True),
    ("transformer", True, True, True),
)
DONG_VARIANTS = _set("dong", *DONG_PARTS)
"""Dong et al. 2021 (Fig. 1): LayerNorm stays in every variant."""
WU_VARIANTS = _set(
    "wu",
    ("san", False, False, False),
    ("san+skip", True, False, False),
    ("san+ln", False, False, True),
    ("san+skip+ln", True, False, True),
    ("transformer", True, True, True),
)
"""Wu et al. 2024 (Sec. 4): the MLP block is removed except in the transformer."""
AUTHORS_VARIANTS = _set("dong-authors", *DONG_PARTS)
"""What Dong et al.'s published code did (BERT, ALBERT, XLNet; quirks in `rankcollapse.hf`)."""

VARIANTS: dict[str, Variant] = {v: v for v in DONG_VARIANTS + WU_VARIANTS + AUTHORS_VARIANTS}
"""Every variant by its name."""


def variants_of(*families: Family) -> list[Variant]:
    """The variants of the given sets, in table order.

    Example:
        >>> variants_of("wu")[:2]
        [Variant('wu:san'), Variant('wu:san+skip')]
    """
    return [v for v in VARIANTS.values() if v.family in families]


def parse_variant(
    name: str | Variant, *, within: Iterable[Family] = tuple(PREFIX), short: bool = False
) -> Variant:
    """The `Variant` a name names, checked to be one of the sets `within`; a `Variant` passes
    through (checked only for its set). `short`: a name within one of the sets ("san+ln" for
    "wu:san+ln") is accepted too. "dong:san" is accepted for "san".

    Raises:
        UnknownNameError: for a name outside those sets (the message lists them).

    Example:
        >>> parse_variant("san+ln", within=["wu"], short=True)
        Variant('wu:san+ln')
    """
    within = tuple(within)
    if not isinstance(name, str):
        raise ConfigError(f"a variant must be a name such as 'san+skip', got {name!r}.")
    found: Variant | None = name if isinstance(name, Variant) else None
    if found is None:
        key = name.strip().removeprefix("dong:")
        prefixes = [""] + [PREFIX[f] for f in within] if short else [""]
        found = next(
            (
                VARIANTS[p + key]
                for p in prefixes
                if p + key in VARIANTS and VARIANTS[p + key].family in within
            ),
            None,
        )
    if found is None or found.family not in within:
        known = [v.short if short else str(v) for v in variants_of(*within)]
        what = "variant" if within == tuple(PREFIX) else " or ".join(within) + " variant"
        raise unknown_name(what, str(name), known)
    return found


def variant_type(*families: Family, short: bool = False) -> Any:
    """A pydantic field type for a variant of the sets `families`: given as a name (parsed once,
    by `parse_variant`; `short`: names within the set, e.g. "san+ln" for Wu's), held as a
    `Variant`, dumped as the name it is given by (the name within the set where `short`), so
    stored configs and their hashes keep strings.

    Example:
        >>> from pydantic import TypeAdapter
        >>> wu = TypeAdapter(variant_type("wu", short=True))
        >>> wu.validate_python("san+ln"), wu.dump_python(wu.validate_python("wu:san+ln"))
        (Variant('wu:san+ln'), 'san+ln')
    """
    from typing import Annotated

    from pydantic import PlainSerializer, PlainValidator, WithJsonSchema

    def parse(name: Any) -> Variant:
        return parse_variant(name, within=families, short=short)

    names = [v.short if short else str(v) for v in variants_of(*families)]
    dump = (lambda v: v.short) if short else str
    schema = {"type": "string", "enum": names}
    return Annotated[Any, PlainValidator(parse), PlainSerializer(dump), WithJsonSchema(schema)]
