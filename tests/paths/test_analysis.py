import pytest
import torch

from rankcollapse.nets import NetConfig, ToyNet, random_tokens
from rankcollapse.paths import (
    BIAS,
    SKIP,
    attention_products,
    decompose_by_length,
    freeze_toy,
    length_frame,
    products_frame,
    rank1_distance,
)


def test_rank1_distance_is_zero_for_rank_one_and_known_for_the_identity():
    rank_one = torch.outer(torch.ones(4), torch.tensor([0.1, 0.2, 0.3, 0.4])).double()
    assert rank1_distance(rank_one).item() < 1e-15
    assert rank1_distance(torch.eye(4, dtype=torch.float64)).item() == pytest.approx(0.75**0.5)


def test_attention_products_multiply_later_layers_on_the_left():
    generator = torch.Generator().manual_seed(0)
    attention = [torch.rand(1, 2, 3, 3, generator=generator).softmax(-1).double() for _ in range(3)]
    routes = torch.tensor([[1, SKIP, 0], [SKIP, SKIP, SKIP]])
    products = attention_products(attention, routes)
    expected = attention[2][0, 0] @ attention[0][0, 1]
    assert torch.allclose(products[0, 0], expected, rtol=1e-14)
    assert torch.equal(products[1, 0], torch.eye(3, dtype=torch.float64))


def test_longer_paths_of_a_pure_san_are_closer_to_rank_one():
    net = ToyNet(NetConfig(n_layers=6, n_heads=2, d_model=16))
    attention = net(random_tokens(2, 8, 16, seed=0), return_attention=True).attention
    frame = products_frame([a.detach() for a in attention], n_paths=8, seed=0)
    medians = frame.groupby("length")["value"].median()
    assert medians.loc[6] < medians.loc[1]
    assert set(frame.columns) == {"length", "path", "sample", "metric", "value", "at_floor"}


def test_length_table_shares_add_up_to_one_for_a_toy_with_skips_and_post_norm():
    net = ToyNet(NetConfig(n_layers=3, n_heads=2, d_model=8, skip="on", norm="post", bias=True))
    frame = length_frame(decompose_by_length(freeze_toy(net, random_tokens(3, 5, 8, seed=0))))
    shares = frame.query("metric == 'share'").groupby("sample")["value"].sum()
    assert shares.tolist() == pytest.approx([1.0] * 3, abs=1e-12)
    assert sorted(set(frame["length"])) == [BIAS, 0, 1, 2, 3]


def test_pure_san_components_below_full_length_get_no_collapse_metrics():
    net = ToyNet(NetConfig(n_layers=2, n_heads=2, d_model=8))
    frame = length_frame(decompose_by_length(freeze_toy(net, random_tokens(1, 5, 8, seed=0))))
    collapse = frame.query("metric == 'res_comp_rel'")
    assert sorted(set(collapse["length"])) == [2]
