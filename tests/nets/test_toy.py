"""ToyNet: determinism, attention kinds, masks, shared weights, temperature, norms, the layer
equation SA(X) = sum_h P_h X W_h + 1 b^T, and training."""

import math

import pytest
import torch
from torch.nn import functional as F

from rankcollapse.errors import ConfigError, InputError
from rankcollapse.masks import causal, mask_from_spec
from rankcollapse.nets import NetConfig, ToyNet, Trace, random_tokens

D = 16


def _net(**values) -> ToyNet:
    return ToyNet(NetConfig(**{"n_layers": 3, "d_model": D, **values}))


def _x(n_tokens=6, batch=2, seed=1, dtype=torch.float64):
    return random_tokens(batch, n_tokens, D, seed=seed, dtype=dtype)


def test_trace_has_input_plus_one_state_per_layer():
    trace = _net(n_heads=2)(_x(), return_attention=True)
    assert isinstance(trace, Trace)
    assert len(trace.states) == 4 and len(trace.attention) == 3
    assert trace.states[0].equal(_x())
    assert trace.output is trace.states[-1]
    assert trace.output.shape == (2, 6, D) and trace.attention[0].shape == (2, 2, 6, 6)
    assert _net()(_x()).attention is None


def test_same_seed_gives_same_weights_and_outputs_and_leaves_global_rng_alone():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    a, b = _net(seed=5, mlp=True, bias=True), _net(seed=5, mlp=True, bias=True)
    assert torch.rand(3).equal(expected)
    for (name, p), (_, q) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        assert p.equal(q), name
    assert a(_x()).output.equal(b(_x()).output)
    assert not _net(seed=6)(_x()).output.equal(a(_x()).output)


def test_random_tokens_are_deterministic_by_seed():
    assert _x(seed=3).equal(_x(seed=3))
    assert not _x(seed=3).equal(_x(seed=4))
    assert random_tokens(1, 2, 3, seed=0, dtype=torch.float32).dtype == torch.float32


@pytest.mark.parametrize("mask", ["complete", "causal", "window:1"])
def test_attention_rows_are_stochastic_and_zero_off_the_mask(mask):
    trace = _net(n_heads=2, mask=mask)(_x(), return_attention=True)
    allowed = mask_from_spec(mask, 6)
    for a in trace.attention:
        assert torch.allclose(a.sum(-1), torch.ones(2, 2, 6, dtype=torch.float64))
        assert (a[..., ~allowed] == 0).all()


def test_hardmax_rows_are_one_hot_on_allowed_keys():
    trace = _net(attention="hardmax", mask="causal_window:2")(_x(), return_attention=True)
    allowed = mask_from_spec("causal_window:2", 6)
    for a in trace.attention:
        assert ((a == 0) | (a == 1)).all()
        assert (a.sum(-1) == 1).all()
        assert (a[..., ~allowed] == 0).all()


def test_hardmax_picks_the_largest_softmax_weight():
    soft = _net(n_layers=1)(_x(), return_attention=True).attention[0]
    hard = _net(n_layers=1, attention="hardmax")(_x(), return_attention=True).attention[0]
    assert hard.equal(F.one_hot(soft.argmax(-1), 6).double())


def test_uniform_attention_is_the_mask_normalised_ones():
    a = _net(attention="uniform", mask="causal")(_x(), return_attention=True).attention
    expected = causal(6).double() / torch.arange(1, 7, dtype=torch.float64)[:, None]
    for layer in a:
        assert torch.allclose(layer, expected.expand_as(layer), atol=0, rtol=1e-15)


@pytest.mark.parametrize("extra", [{}, {"skip": "on", "mlp": True, "norm": "pre"}])
def test_causal_mask_hides_later_tokens_from_earlier_outputs(extra):
    net = _net(mask="causal", n_heads=2, **extra)
    x = _x()
    moved = x.clone()
    moved[:, 4] += 3.0
    before, after = net(x), net(moved)
    for s, t in zip(before.states, after.states, strict=True):
        assert s[:, :4].equal(t[:, :4])
    assert not before.output[:, 4].equal(after.output[:, 4])


def test_shared_weights_reuse_one_block_at_every_layer():
    net = _net(shared_weights=True, n_layers=4)
    assert len(net.blocks) == 1 and all(block is net.blocks[0] for block in net.layers)
    single = _net(n_layers=1)
    assert sum(p.numel() for p in net.parameters()) == sum(p.numel() for p in single.parameters())
    x = _x()
    trace = net(x)
    for l in range(4):  # every layer applies the same (first-drawn) block
        x = single.layers[0](x)[0]
        assert torch.allclose(trace.states[l + 1], x, rtol=1e-13, atol=0)


@pytest.mark.parametrize("temperature", [1 / 64, 1.0, 64.0])
def test_temperature_rescales_the_attention_logits(temperature):
    x = _x()
    default = _net(n_layers=1, d_qk=4)(x, return_attention=True).attention[0]
    tempered = _net(n_layers=1, d_qk=4, temperature=temperature)(x, return_attention=True)
    # log P = s / sqrt(d_qk) - const per row, so the tempered logits are log P * sqrt(4 / T)
    expected = torch.softmax(default.log() * math.sqrt(4 / temperature), dim=-1)
    assert torch.allclose(tempered.attention[0], expected, rtol=1e-9, atol=1e-300)


@pytest.mark.parametrize("skip", ["off", "on"])
def test_post_unit_norm_puts_every_token_on_the_unit_sphere(skip):
    trace = _net(norm="post", norm_kind="unit", skip=skip, mask="causal", n_layers=4)(_x())
    for state in trace.states[1:]:
        assert torch.allclose(state.norm(dim=-1), torch.ones(2, 6, dtype=torch.float64))


def test_layernorm_and_rmsnorm_match_torch():
    x = _x()
    for kind, reference in (
        ("layernorm", lambda y: F.layer_norm(y, (D,), eps=1e-5)),
        ("rmsnorm", lambda y: F.rms_norm(y, (D,), eps=1e-5)),
    ):
        block = _net(norm="post", norm_kind=kind, skip="on").layers[0]
        y, _ = block.attn(x, None)
        assert torch.allclose(block(x)[0], reference(x + y), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_block_follows_its_equation(norm):
    net = _net(n_heads=2, norm=norm, norm_kind="unit", skip="scaled", skip_scale=0.5, mlp=True)
    block, x = net.layers[0], _x()
    unit = x / x.norm(dim=-1, keepdim=True)
    if norm == "pre":
        h = 0.5 * x + block.attn(unit, None)[0]
        u = h / h.norm(dim=-1, keepdim=True)
        expected = h + block.mlp_block.mlp(u)
    else:
        h = 0.5 * x + block.attn(x, None)[0]
        h = h / h.norm(dim=-1, keepdim=True)
        h = h + block.mlp_block.mlp(h)
        expected = h / h.norm(dim=-1, keepdim=True)
    assert torch.allclose(block(x)[0], expected, rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("out_proj", [True, False])
def test_attention_layer_equals_sum_of_heads_plus_row_constant_bias(out_proj):
    net = _net(n_heads=4, bias=True, out_proj=out_proj, mask="window:1")
    attn, x = net.layers[0].attn, _x()
    with torch.no_grad():
        for p in attn.parameters():  # biases start at zero: give them values to test
            p.add_(0.1 * torch.randn(p.shape, generator=torch.Generator().manual_seed(0)).to(p))
        bias = net.mask_bias(6)
        out, probs = attn(x, bias)
        probs_again = attn.attention(x, bias)
        w = attn.head_matrices()  # (h, d, d)
        summed = torch.einsum("bhij,bjd,hde->bie", probs, x, w) + attn.bias_term()
    assert probs.equal(probs_again)
    assert w.shape == (4, D, D) and attn.bias_term().shape == (D,)
    assert torch.allclose(out, summed, rtol=1e-12, atol=1e-13)


def test_orthogonal_value_init_makes_the_single_head_value_map_orthogonal():
    w = _net(value_init="orthogonal").layers[0].attn.head_matrices()[0]
    assert torch.allclose(w @ w.T, torch.eye(D, dtype=torch.float64), atol=1e-13)


def test_without_out_proj_heads_are_concatenated():
    attn = _net(n_heads=4, out_proj=False).layers[0].attn
    assert not any(name.startswith("w_o") for name, _ in attn.named_parameters())
    w = attn.head_matrices()  # head h: W_V,h written into coordinates 4h..4h+3
    assert w[1, :, 4:8].equal(attn.w_v[1]) and (w[1, :, :4] == 0).all()


def test_default_init_std_is_one_over_sqrt_d_model():
    net = ToyNet(NetConfig(n_layers=1, d_model=256))
    std = net.layers[0].attn.w_q.std().item()
    assert abs(std * math.sqrt(256) - 1) < 0.02
    assert net.layers[0].attn.w_q.dtype == torch.float64


def test_float32_network_trains_every_parameter():
    net = _net(dtype="float32", n_heads=2, skip="on", mlp=True, norm="pre", bias=True)
    assert all(p.dtype == torch.float32 for p in net.parameters())
    trace = net(_x(dtype=torch.float32))
    trace.output.pow(2).mean().backward()
    for name, p in net.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_input_of_wrong_shape_is_rejected_with_the_expected_shape():
    with pytest.raises(InputError, match=r"\(batch, n_tokens, 16\), got \(6, 16\).*x\[None\]"):
        _net()(_x()[0])
    with pytest.raises(InputError, match=r"float tokens.*int64"):
        _net()(torch.zeros(1, 2, D, dtype=torch.long))


@pytest.mark.parametrize(
    ("sizes", "message"),
    [
        ((0, 5, 8), "batch is 0; it must be at least 1"),
        ((2, 1, 8), "n_tokens is 1; it must be at least 2"),
        ((2, 5, -8), "d_model is -8; it must be at least 1"),
        ((2, 5, 8.0), r"d_model is 8.0; it must be an integer"),
    ],
)
def test_random_tokens_takes_sizes_within_their_bounds(sizes, message):
    with pytest.raises(ConfigError, match=message):  # it gave an empty tensor, or torch's error
        random_tokens(*sizes, seed=0)
    assert random_tokens(2, 5, 8, seed=0).shape == (2, 5, 8)
