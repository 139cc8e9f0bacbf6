"""Attention masks as directed graphs (Wu et al. 2024): constructors, specs, graph properties.

A mask is a boolean (n, n) tensor, `m[i, j]` True iff query i may attend to key j (the graph
edge j -> i); every diagonal entry is True.
"""

from rankcollapse.masks._validation import check_mask
from rankcollapse.masks.families import (
    bias_of,
    causal,
    causal_window,
    complete,
    dilated,
    from_matrix,
    random_sparse,
    sinks,
    to_bias,
    window,
)
from rankcollapse.masks.graph import (
    center_nodes,
    diameter,
    is_quasi_strongly_connected,
    is_strongly_connected,
    radius,
)
from rankcollapse.masks.spec import (
    MASK_FAMILIES,
    MaskSpec,
    MaskSpecText,
    mask_from_spec,
    parse_mask_spec,
)

__all__ = [
    "MASK_FAMILIES",
    "MaskSpec",
    "MaskSpecText",
    "bias_of",
    "causal",
    "causal_window",
    "center_nodes",
    "check_mask",
    "complete",
    "diameter",
    "dilated",
    "from_matrix",
    "is_quasi_strongly_connected",
    "is_strongly_connected",
    "mask_from_spec",
    "parse_mask_spec",
    "radius",
    "random_sparse",
    "sinks",
    "to_bias",
    "window",
]
