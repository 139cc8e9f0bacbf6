"""Property-based tests of masks: specs print and parse back; graph properties agree with a
plain breadth-first search on random masks and on every family."""

from collections import deque

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rankcollapse.errors import InputError
from rankcollapse.masks import (
    MASK_FAMILIES,
    MaskSpec,
    center_nodes,
    diameter,
    is_quasi_strongly_connected,
    is_strongly_connected,
    mask_from_spec,
    parse_mask_spec,
    radius,
)

EXAMPLES = settings(max_examples=40, deadline=None)

_WIDTH = st.integers(0, 6)
PARAMS = {  # family -> strategy for its parameter tuple, in spec order
    "complete": st.just(()),
    "causal": st.just(()),
    "window": st.tuples(_WIDTH),
    "causal_window": st.tuples(_WIDTH),
    "sinks": st.tuples(st.integers(0, 3), _WIDTH),
    "dilated": st.tuples(_WIDTH, st.integers(1, 4)),
    "random": st.tuples(
        st.floats(0.0, 1.0, allow_nan=False, allow_subnormal=False), st.integers(0, 2**31)
    ),
}
SPECS = st.sampled_from(sorted(PARAMS)).flatmap(
    lambda family: PARAMS[family].map(lambda params: MaskSpec(family, params))
)


def test_every_family_has_a_parameter_strategy():
    assert set(PARAMS) == set(MASK_FAMILIES)


@EXAMPLES
@given(spec=SPECS)
def test_a_spec_prints_and_parses_back_to_itself(spec):
    text = str(spec)
    assert parse_mask_spec(text) == spec
    assert parse_mask_spec(f"  {text} ") == spec  # surrounding blanks are ignored


@EXAMPLES
@given(spec=SPECS, n=st.integers(3, 9))
def test_a_printed_spec_builds_the_same_mask(spec, n):
    if spec.family == "sinks" and spec.params[0] > n:
        with pytest.raises(ValueError, match="n_sinks must be at most"):
            mask_from_spec(str(spec), n)
        return
    assert torch.equal(mask_from_spec(str(spec), n), spec.build(n))


@EXAMPLES
@given(family=st.sampled_from(["window", "causal_window"]), w=_WIDTH, zeros=st.integers(0, 3))
def test_equivalent_spellings_print_one_canonical_spec(family, w, zeros):
    assert str(parse_mask_spec(f"{family}:{'0' * zeros}{w}")) == f"{family}:{w}"


def _distances(m: torch.Tensor) -> list[list[float]]:
    """dist[s][t] along the edges j -> i (m[i, j] True), by breadth-first search from each s."""
    n = m.shape[0]
    out = [[float("inf")] * n for _ in range(n)]
    for source in range(n):
        out[source][source] = 0
        queue = deque([source])
        while queue:
            j = queue.popleft()
            for i in range(n):
                if m[i, j] and out[source][i] == float("inf"):
                    out[source][i] = out[source][j] + 1
                    queue.append(i)
    return out


def _check_against_bfs(m: torch.Tensor) -> None:
    dist = _distances(m)
    n = m.shape[0]
    centers = [c for c in range(n) if max(dist[c]) < float("inf")]
    assert center_nodes(m) == centers
    assert is_quasi_strongly_connected(m) == bool(centers)
    assert is_strongly_connected(m) == (len(centers) == n)
    assert diameter(m) == max(max(row) for row in dist)
    if centers:
        assert radius(m) == min(max(dist[c]) for c in centers)
    else:
        with pytest.raises(InputError, match="no center node"):
            radius(m)


@st.composite
def random_masks(draw) -> torch.Tensor:
    n = draw(st.integers(1, 8))
    bits = draw(st.lists(st.booleans(), min_size=n * n, max_size=n * n))
    return torch.tensor(bits).reshape(n, n) | torch.eye(n, dtype=torch.bool)


@settings(max_examples=50, deadline=None)
@given(m=random_masks())
def test_graph_properties_of_random_masks_match_breadth_first_search(m):
    _check_against_bfs(m)


@EXAMPLES
@given(spec=SPECS, n=st.integers(1, 10))
def test_graph_properties_of_every_family_match_breadth_first_search(spec, n):
    if spec.family == "sinks" and spec.params[0] > n:
        return
    _check_against_bfs(spec.build(n))
