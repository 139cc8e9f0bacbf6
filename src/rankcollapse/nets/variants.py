"""The toy network's variants, named as `rankcollapse.hf` names the variants of real models.

The toy starts from the pure attention network and adds parts; a real model starts from the
whole transformer and removes them. The names mean the same parts in both:

| variant          | attention skip | MLP block (own skip) | norm (after the sum)   |
|------------------|----------------|----------------------|------------------------|
| san              | -              | -                    | -                      |
| san+skip         | X + SA(X)      | -                    | -                      |
| san+mlp          | -              | X + MLP(X)           | -                      |
| san+ln           | -              | -                    | LayerNorm              |
| transformer      | X + SA(X)      | X + MLP(X)           | LayerNorm              |
| wu:san           | -              | -                    | -                      |
| wu:san+skip      | X + SA(X)      | -                    | -                      |
| wu:san+ln        | -              | -                    | unit sphere, x / ||x|| |
| wu:san+skip+ln   | X + SA(X)      | -                    | unit sphere            |
| wu:transformer   | X + SA(X)      | X + MLP(X)           | unit sphere            |

The Dong et al. (2021) variants use LayerNorm after the sum (post-LN, as BERT); the Wu et al.
(2024, Sec. 4) variants use their LayerNorm, the scaling of each token onto the unit sphere.
One difference from the real-model table: a toy `san` has no norm at all (a real model's Dong
`san` keeps its LayerNorms), so the toy `san` and `wu:san` are the same network.
"""

from __future__ import annotations

from typing import Any

from rankcollapse.errors import unknown_name
from rankcollapse.nets.config import NetConfig

_UNIT = {"norm": "post", "norm_kind": "unit"}

TOY_VARIANTS: dict[str, dict[str, Any]] = {
    "san": {},
    "san+skip": {"skip": "on"},
    "san+mlp": {"mlp": True},
    "san+ln": {"norm": "post"},
    "transformer": {"skip": "on", "mlp": True, "norm": "post"},
    "wu:san": {},
    "wu:san+skip": {"skip": "on"},
    "wu:san+ln": dict(_UNIT),
    "wu:san+skip+ln": {"skip": "on", **_UNIT},
    "wu:transformer": {"skip": "on", "mlp": True, **_UNIT},
}
"""NetConfig options of each toy variant (added to the pure single-head SAN's defaults)."""


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
