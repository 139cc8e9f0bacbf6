"""Decoupled-rank attention: a hand-computed head, hardmax as the zero-temperature limit,
stacked configurations equal to their own layers, independence of their gradients, bad input."""

from __future__ import annotations

import math

import pytest
import torch

from rankcollapse.errors import ConfigError
from rankcollapse.nets import RankAttention, RankEncoder, StackedRankAttention
from rankcollapse.nets.layers import hardmax
from rankcollapse.nets import rank_attention
from rankcollapse.nets.rank_attention import stream_attention

F64 = torch.float64


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_one_head_is_a_softmax_average_of_mapped_points_by_hand():
    w_q = torch.tensor([[[1.0, 0.0]]], dtype=F64)  # rank 1: scores = y_1 * x_j1
    w_k = torch.tensor([[[2.0, 0.0]]], dtype=F64)
    w_o = torch.tensor([[[0.0, 1.0], [1.0, 0.0]]], dtype=F64)  # M swaps the coordinates
    layer = RankAttention.from_weights(w_q, w_k, w_o)
    x = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]], dtype=F64)
    y = torch.tensor([[[0.5, 0.3]]], dtype=F64)
    p = math.exp(1.0) / (math.exp(1.0) + 1.0)  # scores 0.5 * 2 * 1 = 1 and 0
    expected = torch.tensor([[[1 - p, p]]], dtype=F64)
    assert torch.allclose(layer(y, x), expected, atol=1e-15)


def test_hardmax_is_the_zero_temperature_limit_of_softmax():
    torch.manual_seed(0)
    soft = RankAttention(6, d_qk=2, n_heads=3, seed=1, dtype=F64)
    hard = RankAttention.from_weights(
        soft.w_q.detach(), soft.w_k.detach(), soft.w_o.detach(), hard=True
    )
    cold = RankAttention.from_weights(1e4 * soft.w_q.detach(), soft.w_k.detach(), soft.w_o.detach())
    y, x = torch.randn(4, 2, 6, dtype=F64), torch.randn(4, 5, 6, dtype=F64)
    assert torch.allclose(cold(y, x), hard(y, x), atol=1e-8)
    assert hardmax(torch.tensor([3.0, 1.0, 2.0])).tolist() == [1.0, 0.0, 0.0]


def test_stacked_configurations_compute_what_their_own_layers_compute(rng):
    ranks, heads, seeds = [1, 3, 6, 2], [4, 2, 1, 1], [0, 0, 5, 7]
    stack = StackedRankAttention(6, d_qk=ranks, n_heads=heads, seeds=seeds, dtype=F64)
    assert stack.streams == [0, 5, 7]  # one data stream per seed
    y, x = (
        torch.randn(3, 3, 2, 6, dtype=F64, generator=rng),
        torch.randn(3, 3, 5, 6, dtype=F64, generator=rng),
    )
    out = stack(y, x)
    for c, (r, h, s) in enumerate(zip(ranks, heads, seeds, strict=True)):
        alone = RankAttention(6, d_qk=r, n_heads=h, seed=s, dtype=F64)
        stream = stack.streams.index(s)
        assert torch.allclose(out[c], alone(y[stream], x[stream]), atol=1e-13)
        assert torch.equal(stack.config_weights(c)[0], alone.w_q.detach())
        assert torch.equal(stack.per_config(y)[c], y[stream])  # its stream's data


def test_one_streams_data_serves_every_configuration_as_a_view():
    stack = StackedRankAttention(4, d_qk=[1, 4], n_heads=[3, 1], seeds=[2, 2])
    target = torch.arange(6.0).view(1, 2, 3)
    assert stack.per_config(target).shape == (2, 2, 3)
    assert stack.per_config(target).data_ptr() == target.data_ptr()  # no copy


@pytest.mark.parametrize("hard", [False, True])
@pytest.mark.parametrize("lead", [(), (2, 3)])
def test_stacked_configurations_agree_with_their_own_layers_for_hardmax_and_any_leading_axes(
    hard, lead, rng
):
    ranks, heads, seeds = [2, 1, 6], [3, 2, 1], [4, 4, 1]
    stack = StackedRankAttention(6, d_qk=ranks, n_heads=heads, seeds=seeds, hard=hard, dtype=F64)
    y, x = (
        torch.randn(2, *lead, 3, 6, dtype=F64, generator=rng),
        torch.randn(2, *lead, 5, 6, dtype=F64, generator=rng),
    )
    out = stack(y, x)
    assert out.shape == (3, *lead, 3, 6)
    for c, (r, h, s) in enumerate(zip(ranks, heads, seeds, strict=True)):
        alone = RankAttention(6, d_qk=r, n_heads=h, seed=s, hard=hard, dtype=F64)
        stream = stack.streams.index(s)
        assert torch.allclose(out[c], alone(y[stream], x[stream]), atol=1e-13)


def test_one_configurations_loss_reaches_only_its_own_heads(rng):
    stack = StackedRankAttention(4, d_qk=[1, 4], n_heads=[3, 1], seeds=[0, 0])
    stack(torch.randn(1, 3, 2, 4, generator=rng), torch.randn(1, 3, 5, 4, generator=rng))[
        0
    ].square().sum().backward()
    for grad, owner in (
        (stack.w_q.grad, stack.row_config),
        (stack.w_k.grad, stack.row_config),
        (stack.w_o.grad, stack.head_config),
    ):
        assert grad[owner == 1].abs().max() == 0
        assert grad[owner == 0].abs().max() > 0


@pytest.mark.parametrize("hard", [False, True])
@pytest.mark.parametrize("chunk", [2**17, 24])  # the whole batch at once; one sample a slice
def test_the_written_out_backward_is_the_gradient_of_the_stacked_heads(
    hard, chunk, rng, monkeypatch
):
    monkeypatch.setattr(rank_attention, "CHUNK", chunk)  # a slice's u: q H d = 2 * 3 * 4
    y, x = (
        torch.randn(3, 2, 4, dtype=F64, generator=rng),
        torch.randn(3, 5, 4, dtype=F64, generator=rng),
    )
    forms, maps = (
        torch.randn(4, 12, dtype=F64, generator=rng),
        torch.randn(12, 4, dtype=F64, generator=rng),
    )
    inputs = [t.requires_grad_() for t in (y, x, forms, maps)]
    if hard:  # the argmax passes no gradient: only x (the averaged points) and the maps get one
        assert torch.autograd.gradcheck(
            lambda x, maps: stream_attention(y.detach(), x, forms.detach(), maps, [8, 4], True),
            (x, maps),
        )
    else:
        assert torch.autograd.gradcheck(
            lambda *inputs: stream_attention(*inputs, [8, 4], False), tuple(inputs)
        )


def test_query_key_products_have_rank_at_most_d_qk():
    layer = RankAttention(8, d_qk=3, n_heads=2, seed=0, dtype=F64)
    products = layer.w_q.transpose(-1, -2) @ layer.w_k  # W_Q,h^T W_K,h, (H, d, d)
    assert torch.linalg.matrix_rank(products).tolist() == [3, 3]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"d_qk": 9, "n_heads": 1}, r"d_qk=9 .* d_model=8.*1 <= d_qk <= 8"),
        ({"d_qk": 0, "n_heads": 1}, r"d_qk=0"),
        ({"d_qk": 2, "n_heads": 0}, r"n_heads=0.*at least one head"),
    ],
)
def test_bad_rank_or_heads_get_a_clear_error(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        RankAttention(8, **kwargs)


def test_stacked_lists_must_describe_the_same_configurations():
    with pytest.raises(ConfigError, match="same configurations.*2, 1, 1"):
        StackedRankAttention(4, d_qk=[1, 2], n_heads=[1], seeds=[0])


def test_encoder_is_seeded_and_its_width_multiplier_adds_attention_modules(rng):
    x = torch.nn.functional.normalize(torch.randn(3, 5, 8, generator=rng), dim=-1)
    a, b = (
        RankEncoder(8, n_heads=2, n_layers=2, d_ff=16, seed=3),
        RankEncoder(8, n_heads=2, n_layers=2, d_ff=16, seed=3),
    )
    assert torch.equal(a(x), b(x))
    wide = RankEncoder(8, n_heads=2, n_layers=1, d_ff=16, width_multiplier=4, seed=0)
    n_attention = sum(isinstance(m, torch.nn.MultiheadAttention) for m in wide.modules())
    assert n_attention == 4
    out = wide(x)  # post-norm with unit normalisation: every output row has norm g = 1
    assert torch.allclose(out.norm(dim=-1), torch.ones(3, 5), atol=1e-5)
    with pytest.raises(ConfigError, match="n_heads=3 must divide the width d_model"):
        RankEncoder(8, n_heads=3, n_layers=1)


def test_encoder_scratch_dimensions_carry_each_tokens_position_and_are_dropped_at_the_end():
    x = torch.nn.functional.normalize(
        torch.randn(3, 4, 8, generator=torch.Generator().manual_seed(0)), dim=-1
    )
    scratch = RankEncoder(8, n_heads=12, n_layers=2, d_ff=16, positions=4, seed=0)
    assert scratch.d_qk == 1 and scratch.layers[0].self_attn.embed_dim == 12
    out = scratch(x)
    assert out.shape == (3, 4, 8)
    # the position one-hot breaks permutation equivariance: swapping two tokens changes outputs
    swapped = scratch(x[:, [1, 0, 2, 3]])
    assert not torch.allclose(swapped[:, [1, 0, 2, 3]], out, atol=1e-4)
    plain = RankEncoder(8, n_heads=8, n_layers=1, d_ff=16, seed=0)
    assert torch.allclose(plain(x[:, [1, 0, 2, 3]])[:, [1, 0, 2, 3]], plain(x), atol=1e-5)
    with pytest.raises(ConfigError, match="5 tokens but 4 position dimensions"):
        scratch(torch.randn(1, 5, 8, generator=torch.Generator().manual_seed(0)))
    with pytest.raises(ConfigError, match="must divide the width d_model \\+ positions = 12"):
        RankEncoder(8, n_heads=8, n_layers=1, positions=4)
