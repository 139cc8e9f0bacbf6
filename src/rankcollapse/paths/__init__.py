"""Path decompositions of attention networks (Dong et al. 2021, Sec. 3)."""

from typing import Any

from rankcollapse.paths.analysis import (
    BIAS,
    COMPONENT_METRICS,
    attention_products,
    exact_error_frame,
    length_frame,
    length_summary,
    products_frame,
    rank1_distance,
)
from rankcollapse.paths.counting import (
    REFERENCE_ARCHITECTURES,
    architecture_paths,
    architecture_sizes,
    count_paths,
    layers_and_heads,
    mean_path_length,
    n_paths,
)
from rankcollapse.paths.decompose import (
    MAX_PATHS,
    Enumeration,
    LengthDecomposition,
    count_enumerated,
    decompose_by_length,
    enumerate_paths,
    path_matrices,
)
from rankcollapse.paths.frozen import FrozenAttention, FrozenMLP, FrozenNet, FrozenNorm, Sublayer
from rankcollapse.paths.sampling import (
    FULL,
    SKIP,
    path_restricted_forward,
    restricted_logits,
    sample_paths,
)
from rankcollapse.paths.toy import freeze_toy


def __getattr__(name: str) -> Any:
    # freeze_real needs rankcollapse.hf, which imports transformers (seconds): load it on use.
    if name in ("freeze_real", "decompose_real", "DECOMPOSABLE"):
        from rankcollapse.paths import real

        return getattr(real, name)
    raise AttributeError(f"module 'rankcollapse.paths' has no attribute '{name}'")


__all__ = [
    "BIAS",
    "COMPONENT_METRICS",
    "DECOMPOSABLE",
    "FULL",
    "MAX_PATHS",
    "REFERENCE_ARCHITECTURES",
    "SKIP",
    "Enumeration",
    "FrozenAttention",
    "FrozenMLP",
    "FrozenNet",
    "FrozenNorm",
    "LengthDecomposition",
    "Sublayer",
    "architecture_paths",
    "architecture_sizes",
    "attention_products",
    "count_enumerated",
    "count_paths",
    "decompose_by_length",
    "decompose_real",
    "enumerate_paths",
    "exact_error_frame",
    "freeze_real",
    "freeze_toy",
    "layers_and_heads",
    "length_frame",
    "length_summary",
    "mean_path_length",
    "n_paths",
    "path_matrices",
    "path_restricted_forward",
    "products_frame",
    "rank1_distance",
    "restricted_logits",
    "sample_paths",
]
