"""The toy network's variants, named as `rankcollapse.hf` names the variants of real models.

The toy starts from the pure attention network and adds parts; a real model starts from the
whole transformer and removes them. The names mean the same parts in both: the attention
skip and the MLP block of every name the toy shares with `rankcollapse.variants.VARIANTS` are
read from that table (`toy_parts`), so the two cannot drift. The norm is the toy's own rule:

- Dong et al. (2021) names: LayerNorm after the sum (post-LN, as BERT) in `transformer`
  only. This is the one difference from the real-model table: a toy `san` (and `san+skip`,
  `san+mlp`) has no norm at all, as in Dong et al.'s theory, while a real model's Dong `san`
  keeps its LayerNorms; the toy-only `san+ln` is the pure SAN with post-LN.
- Wu et al. (2024, Sec. 4) names: their LayerNorm, the scaling of each token onto the unit
  sphere, wherever the table keeps the norms. So the toy `san` and `wu:san` are the same
  network.

`rankcollapse variants` prints the toy table (`toy_rows`):

    >>> for row in toy_rows():
    ...     print(" | ".join(row.values()))
    san | off | off | none
    san+skip | on | off | none
    san+mlp | off | on | none
    san+ln | off | off | LayerNorm (toy only)
    transformer | on | on | LayerNorm
    wu:san | off | off | none
    wu:san+skip | on | off | none
    wu:san+ln | off | off | unit sphere
    wu:san+skip+ln | on | off | unit sphere
    wu:transformer | on | on | unit sphere
"""

from __future__ import annotations

from typing import Any

from rankcollapse.errors import unknown_name
from rankcollapse.nets.config import NetConfig
from rankcollapse.variants import VARIANTS, Variant

_LAYER_NORM = {"norm": "post"}
_UNIT = {"norm": "post", "norm_kind": "unit"}
TOY_ONLY: dict[str, dict[str, Any]] = {"san+ln": dict(_LAYER_NORM)}
"""Toy variants outside `VARIANTS`: the pure SAN with post-LN (Dong et al.'s Sec. 3.2 case)."""
TOY_NAMES = (
    "san",
    "san+skip",
    "san+mlp",
    "san+ln",
    "transformer",
    "wu:san",
    "wu:san+skip",
    "wu:san+ln",
    "wu:san+skip+ln",
    "wu:transformer",
)
"""The toy's variants, in the order they are listed."""


def toy_parts(variant: Variant) -> dict[str, Any]:
    """The `NetConfig` options of a variant of `VARIANTS` on the toy: its attention skip and
    MLP block as the table says, and the toy's norm rule (module docstring).

    Example:
        >>> from rankcollapse.variants import parse_variant
        >>> toy_parts(parse_variant("transformer")), toy_parts(parse_variant("wu:san+ln"))
        ({'skip': 'on', 'mlp': True, 'norm': 'post'}, {'norm': 'post', 'norm_kind': 'unit'})
    """
    parts: dict[str, Any] = {}
    if variant.attention_skip:
        parts["skip"] = "on"
    if variant.mlp:
        parts["mlp"] = True
    if variant.family == "wu" and variant.norms:
        parts.update(_UNIT)
    elif variant.family == "dong" and variant.is_identity:
        parts.update(_LAYER_NORM)
    return parts


TOY_VARIANTS: dict[str, dict[str, Any]] = {
    name: dict(TOY_ONLY[name]) if name in TOY_ONLY else toy_parts(VARIANTS[name])
    for name in TOY_NAMES
}
"""NetConfig options of each toy variant (added to the pure single-head SAN's defaults)."""


def toy_rows() -> list[dict[str, str]]:
    """The toy variants as rows of words (variant, attention skip, MLP block, norm), read from
    `TOY_VARIANTS`: the table `rankcollapse variants` prints."""
    rows = []
    for name, options in TOY_VARIANTS.items():
        config = NetConfig(**options)
        norm = "none"
        if config.norm != "none":
            norm = "unit sphere" if config.norm_kind == "unit" else "LayerNorm"
        rows.append(
            {
                "variant": name,
                "attention skip": "off" if config.skip == "off" else config.skip,
                "MLP block": "on" if config.mlp else "off",
                "norm": norm + (" (toy only)" if name in TOY_ONLY else ""),
            }
        )
    return rows


def toy_config(variant: str, **options: Any) -> NetConfig:
    """The `NetConfig` of a named toy variant; `options` (sizes, seed, ...) are set on top.

    Example:
        >>> toy_config("san+skip", n_layers=3).skip
        'on'
        >>> toy_config("wu:san+ln", n_layers=2).norm_kind
        'unit'
    """
    if variant not in TOY_VARIANTS:
        raise unknown_name("toy variant", variant, list(TOY_VARIANTS))
    return NetConfig(**{**TOY_VARIANTS[variant], **options})
