"""How many paths of each length an attention network has (Dong et al. 2021, Sec. 3).

With skip connections every layer offers H heads plus the skip (an extra "head" with P = I,
W = I), so a network of L layers has (H + 1)^L paths. A path's length is the number of layers
where it goes through a real head: C(L, k) H^k paths have length k, a share of
C(L, k) H^k / (H + 1)^L. Without skips every path goes through a head at every layer: H^L paths,
all of length L.

Counts are exact Python integers (they overflow int64 quickly: BERT-base has 13^12 ~ 2.3e13,
a 30-layer Llama 10^30); shares are computed from those integers, then rounded once to float.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from rankcollapse.errors import ConfigError, InputError, unknown_name
from rankcollapse.files import is_directory
from rankcollapse.sizes import check_size

# Attribute names of the depth and head count in Hugging Face configs; most models map their own
# names (GPT-2's n_layer, DistilBERT's n_layers) onto the first pair through `attribute_map`.
_LAYER_KEYS = ("num_hidden_layers", "n_layer", "n_layers", "num_layers")
_HEAD_KEYS = ("num_attention_heads", "n_head", "n_heads")


MAX_DIGITS = 1000  # exact path counts up to 10^1000: printable (Python's limit is 4300 digits)


def _check_sizes(n_layers: int, n_heads: int) -> None:
    check_size("n_layers", n_layers)
    check_size("n_heads", n_heads)


def n_paths(n_layers: int, n_heads: int, length: int, *, skip: bool = True) -> int:
    """Number of paths of exactly `length` heads: C(L, k) H^k with skips, H^L (k = L only) without.

    Example:
        >>> n_paths(6, 2, 3)
        160
        >>> n_paths(6, 2, 3, skip=False)
        0
    """
    _check_sizes(n_layers, n_heads)
    if isinstance(length, bool) or not isinstance(length, int) or not 0 <= length <= n_layers:
        raise ConfigError(
            f"path length k = {length!r} is not allowed for a network of {n_layers} layers; "
            f"use 0 <= k <= {n_layers}."
        )
    if not skip:
        return n_heads**n_layers if length == n_layers else 0
    return math.comb(n_layers, length) * n_heads**length


def count_paths(n_layers: int, n_heads: int, *, skip: bool = True) -> pd.DataFrame:
    """Number and share of paths of each length k = 0..L.

    Formula: n_k = C(L, k) H^k, share_k = n_k / (H + 1)^L (with skips); n_L = H^L, share 1
        (without skips).
    Reference: Dong, Cordonnier, Loukas 2021, Sec. 3 and Fig. 3.

    Args:
        n_layers: L, the number of attention layers.
        n_heads: H, heads per layer.
        skip: whether each layer has a skip connection (an extra identity branch).

    Returns:
        one row per length: `length`, `n_paths` (exact int, object dtype), `share` (float64).

    Example:
        >>> count_paths(2, 3)[["length", "n_paths", "share"]].values.tolist()
        [[0, 1, 0.0625], [1, 6, 0.375], [2, 9, 0.5625]]
    """
    _check_sizes(n_layers, n_heads)
    digits = n_layers * math.log10(n_heads + 1)
    if digits > MAX_DIGITS:
        raise ConfigError(
            f"L = {n_layers} layers of H = {n_heads} heads have (H + 1)^L, about 10^{digits:.0f} "
            f"paths; exact counts are kept to numbers of at most {MAX_DIGITS} digits. Pass fewer "
            "layers or heads (a share depends on L and H only through the binomial law)."
        )
    counts = [0] * n_layers + [n_heads**n_layers]
    if skip:  # n_{k+1} = n_k (L - k) H / (k + 1), exact: one product per length
        counts[0] = 1
        for k in range(n_layers):
            counts[k + 1] = counts[k] * (n_layers - k) * n_heads // (k + 1)
    total = sum(counts)
    return pd.DataFrame(
        {
            "length": range(n_layers + 1),
            "n_paths": pd.Series(counts, dtype=object),
            "share": [count / total for count in counts],
        }
    )


def mean_path_length(n_layers: int, n_heads: int, *, skip: bool = True) -> float:
    """Expected length of a uniformly drawn path: L H / (H + 1) with skips (binomial), L without.

    Example:
        >>> mean_path_length(12, 12)
        11.076923076923077
    """
    _check_sizes(n_layers, n_heads)
    return n_layers * n_heads / (n_heads + 1) if skip else float(n_layers)


def layers_and_heads(config: Any) -> tuple[int, int]:
    """(n_layers, n_heads) of a Hugging Face config object, config dict, or local model directory.

    Only the config is read (no weights). A model directory must hold a `config.json`.

    Example:
        >>> layers_and_heads({"n_layer": 12, "n_head": 12, "model_type": "gpt2"})
        (12, 12)
    """
    if isinstance(config, str | Path):
        from rankcollapse.hf.folders import read_model_config  # checks config.json first

        config = read_model_config(config)
    values = config if isinstance(config, Mapping) else None

    def first(keys: tuple[str, ...]) -> int | None:
        for key in keys:
            value = values.get(key) if values is not None else getattr(config, key, None)
            if isinstance(value, int):
                return value
        return None

    n_layers, n_heads = first(_LAYER_KEYS), first(_HEAD_KEYS)
    if n_layers is None or n_heads is None:
        kind = values.get("model_type") if values is not None else type(config).__name__
        raise InputError(
            f"config of '{kind}' names no depth or head count; expected one of "
            f"{', '.join(_LAYER_KEYS)} and one of {', '.join(_HEAD_KEYS)}."
        )
    return n_layers, n_heads


#: The architectures `rankcollapse paths count` shows by default (names of `rankcollapse.hf.MODELS`).
REFERENCE_ARCHITECTURES = ("distilbert", "bert-base", "bert-large", "gpt2", "llama-small")


def architecture_sizes(name: str) -> tuple[int, int]:
    """(n_layers, n_heads) of a named model of the registry or a local model directory (its
    config.json alone), or a clear error for any other name.

    Example:
        >>> architecture_sizes("bert-base")
        (12, 12)
    """
    from rankcollapse.hf import MODELS

    if name in MODELS:
        return MODELS[name].n_layers, MODELS[name].n_heads
    if is_directory(name):
        return layers_and_heads(name)
    raise unknown_name("architecture", name, MODELS, "or a local model directory")


def architecture_paths(name: str, *, skip: bool = True) -> pd.DataFrame:
    """`count_paths` for a named model of the registry (`rankcollapse.hf.MODELS`, whose sizes
    it declares) or a local model directory (read from its config.json alone).

    Rows carry `architecture`, `n_layers`, `n_heads` before the `count_paths` columns.

    Example:
        >>> df = architecture_paths("bert-base")
        >>> int(df.loc[df["share"].idxmax(), "length"]), len(df)
        (11, 13)
    """
    n_layers, n_heads = architecture_sizes(name)
    df = count_paths(n_layers, n_heads, skip=skip)
    df.insert(0, "n_heads", n_heads)
    df.insert(0, "n_layers", n_layers)
    df.insert(0, "architecture", name)
    return df
