"""Graph properties of masks (Wu et al. 2024, masks as directed graphs).

The mask is read as a directed graph with the edge j -> i whenever `m[i, j]` (query i attends
to key j, so information flows from j to i). Distances are breadth-first shortest-path lengths
along these edges; every node is at distance 0 from itself.

- center node: reaches every node by directed paths;
- quasi-strongly connected: at least one center node;
- strongly connected: every node reaches every node;
- radius: min over center nodes of the largest distance from it to any node;
- diameter: the largest distance between any ordered pair of nodes.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components, shortest_path
from torch import Tensor

from rankcollapse.errors import InputError
from rankcollapse.masks._validation import check_mask


def _graph(m: Tensor) -> csr_matrix:
    """Sparse adjacency with entry [j, i] for the edge j -> i (scipy's rows are edge sources)."""
    check_mask(m)
    return csr_matrix(m.T.cpu().numpy())


def center_nodes(m: Tensor) -> list[int]:
    """The tokens that reach every token by directed paths, in increasing order.

    Found from the strongly connected components: centers exist iff exactly one component has
    no edge coming in from another component, and then they are its members.

    Example:
        >>> from rankcollapse.masks import causal, complete
        >>> center_nodes(causal(4)), center_nodes(complete(3))
        ([0], [0, 1, 2])
    """
    graph = _graph(m)
    n_components, labels = connected_components(graph, directed=True, connection="strong")
    sources, targets = graph.nonzero()
    has_incoming = np.zeros(n_components, dtype=bool)
    crossing = labels[sources] != labels[targets]
    has_incoming[labels[targets[crossing]]] = True
    roots = np.flatnonzero(~has_incoming)
    if len(roots) != 1:
        return []
    return np.flatnonzero(labels == roots[0]).tolist()


def is_quasi_strongly_connected(m: Tensor) -> bool:
    """True iff at least one token reaches every token (the condition of Wu et al.'s Thm 1).

    Example:
        >>> from rankcollapse.masks import causal, dilated
        >>> is_quasi_strongly_connected(causal(4)), is_quasi_strongly_connected(dilated(4, 1, 2))
        (True, False)
    """
    return len(center_nodes(m)) > 0


def is_strongly_connected(m: Tensor) -> bool:
    """True iff every token reaches every token.

    Example:
        >>> from rankcollapse.masks import causal, window
        >>> is_strongly_connected(window(5, 1)), is_strongly_connected(causal(5))
        (True, False)
    """
    n_components, _ = connected_components(_graph(m), directed=True, connection="strong")
    return n_components == 1


def radius(m: Tensor) -> int:
    """min over center nodes c of max over tokens t of dist(c -> t).

    Raises:
        InputError: when the mask has no center node (not quasi-strongly connected), where the
            radius of Wu et al. is undefined.

    Example:
        >>> from rankcollapse.masks import causal_window, window
        >>> radius(window(9, 2)), radius(causal_window(9, 2))
        (2, 4)
    """
    centers = center_nodes(m)
    if not centers:
        raise InputError(
            f"the mask on {m.shape[0]} tokens has no center node (no token reaches every other "
            "token), so its radius is undefined; check `is_quasi_strongly_connected(m)` first, "
            "or add edges (e.g. a global token: masks.sinks)."
        )
    distances = shortest_path(_graph(m), directed=True, unweighted=True, indices=centers)
    return int(distances.max(axis=1).min())


def diameter(m: Tensor) -> float:
    """The largest shortest-path distance over all ordered pairs of tokens.

    Returns `math.inf` when the mask is not strongly connected (some token cannot reach
    another); otherwise a whole number (returned as float so both cases share a type).

    Example:
        >>> from rankcollapse.masks import causal, window
        >>> diameter(window(9, 2)), diameter(causal(3))
        (4.0, inf)
    """
    distances = shortest_path(_graph(m), directed=True, unweighted=True)
    longest = float(distances.max())
    return math.inf if math.isinf(longest) else longest
