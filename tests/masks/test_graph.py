"""Graph properties of masks against the closed forms of Wu et al. 2024 (masks as directed graphs, radius and centre nodes)."""

import math

import pytest
import torch

from rankcollapse.errors import InputError
from rankcollapse.masks import (
    causal,
    causal_window,
    center_nodes,
    complete,
    diameter,
    dilated,
    from_matrix,
    is_quasi_strongly_connected,
    is_strongly_connected,
    radius,
    random_sparse,
    sinks,
    window,
)

SIZES = [2, 3, 8, 17, 64]


@pytest.mark.parametrize("n", SIZES)
def test_complete_mask_has_radius_one_and_every_token_a_center(n):
    assert radius(complete(n)) == 1
    assert center_nodes(complete(n)) == list(range(n))
    assert is_strongly_connected(complete(n))
    assert diameter(complete(n)) == 1


@pytest.mark.parametrize("n", SIZES)
def test_causal_mask_has_radius_one_and_the_first_token_as_only_center(n):
    assert radius(causal(n)) == 1
    assert center_nodes(causal(n)) == [0]
    assert is_quasi_strongly_connected(causal(n))
    assert not is_strongly_connected(causal(n))
    assert diameter(causal(n)) == math.inf


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("w", [1, 2, 5])
def test_window_radius_is_ceil_of_n_minus_one_over_two_w(n, w):
    m = window(n, w)
    assert radius(m) == math.ceil((n - 1) / (2 * w))
    assert is_strongly_connected(m)
    assert center_nodes(m) == list(range(n))  # strongly connected: every token is a center
    assert diameter(m) == math.ceil((n - 1) / w)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("w", [1, 2, 5])
def test_causal_window_radius_is_ceil_of_n_minus_one_over_w_with_one_center(n, w):
    m = causal_window(n, w)
    assert radius(m) == math.ceil((n - 1) / w)
    assert center_nodes(m) == [0]
    assert not is_strongly_connected(m)


@pytest.mark.parametrize("n", SIZES)
def test_sinks_make_a_strongly_connected_mask_of_radius_one(n):
    m = sinks(n, 1, 1)
    assert is_strongly_connected(m)
    assert radius(m) == 1
    assert diameter(m) == (1 if n <= 3 else 2)  # two non-neighbours meet through the sink


def test_dilated_mask_splits_into_residue_classes_without_a_center():
    m = dilated(10, 2, 3)
    assert center_nodes(m) == []
    assert not is_quasi_strongly_connected(m)
    assert diameter(m) == math.inf
    assert dilated(10, 2, 1).equal(window(10, 2))


def test_a_single_token_is_its_own_center_at_radius_zero():
    assert center_nodes(complete(1)) == [0]
    assert radius(complete(1)) == 0
    assert diameter(complete(1)) == 0


def test_edge_direction_is_key_to_query():
    # m[1, 0]: query 1 attends key 0, so the edge is 0 -> 1 and only token 0 reaches both
    m = from_matrix([[True, False], [True, True]])
    assert center_nodes(m) == [0]


def test_center_nodes_agree_with_reachability_by_matrix_powers():
    for seed in range(6):
        m = random_sparse(12, 0.12, seed=seed)
        reach = m.T.double()  # reach[s, t] > 0: s -> t within k steps (self-loops kept)
        for _ in range(12):
            reach = ((reach @ m.T.double()) > 0).double()
        expected = [s for s in range(12) if bool((reach[s] > 0).all())]
        assert center_nodes(m) == expected
        assert is_strongly_connected(m) == bool((reach > 0).all())


def test_radius_without_a_center_raises_a_clear_error():
    with pytest.raises(InputError, match=r"on 6 tokens has no center node.*radius is undefined"):
        radius(dilated(6, 1, 2))


def test_graph_functions_validate_the_mask():
    with pytest.raises(InputError, match="lack a self-loop"):
        center_nodes(~torch.eye(3, dtype=torch.bool))
