"""Path decompositions of attention networks (Dong et al. 2021, Sec. 3)."""

from rankcollapse.paths.counting import (
    REFERENCE_ARCHITECTURES,
    architecture_paths,
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
from rankcollapse.paths.sampling import FULL, SKIP, path_restricted_forward, sample_paths

__all__ = [
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
    "count_enumerated",
    "count_paths",
    "decompose_by_length",
    "enumerate_paths",
    "layers_and_heads",
    "mean_path_length",
    "n_paths",
    "path_matrices",
    "path_restricted_forward",
    "sample_paths",
]
