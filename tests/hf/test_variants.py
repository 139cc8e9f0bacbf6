"""Each ablation matches a hand-computed block on a tiny random model."""

import itertools
import math

import pytest
import torch
from torch.nn import functional as F

from rankcollapse.errors import ConfigError, UnknownNameError
from rankcollapse.hf import (
    ARCHITECTURES,
    VARIANTS,
    RunSettings,
    describe,
    parse_variant,
    run_batch,
)


def states(loaded, ids, variant):
    got = []
    run_batch(loaded, ids, on_layer=got.append, settings=RunSettings(variant))
    return [c.states for c in got]


def bert_attention(layer, x):
    """Multi-head softmax attention of a BERT layer, by hand: sum_h P_h X W_V,h (before dense)."""
    sa = layer.attention.self
    b, n, d = x.shape
    h = sa.num_attention_heads
    split = lambda t: t.view(b, n, h, d // h).transpose(1, 2)  # (b, h, n, d_head)
    q, k, v = split(sa.query(x)), split(sa.key(x)), split(sa.value(x))
    p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d // h), dim=-1)
    return (p @ v).transpose(1, 2).reshape(b, n, d)


def bert_branch(layer, x):
    return layer.attention.output.dense(bert_attention(layer, x))


def bert_mlp(layer, y):
    return layer.output.dense(F.gelu(layer.intermediate.dense(y)))


def bert_post_mlp(layer, y):
    return layer.output.LayerNorm(y + bert_mlp(layer, y))


BERT_BLOCKS = {
    # variant: block(layer, x) by hand
    "san": lambda L, x: L.attention.output.LayerNorm(bert_branch(L, x)),
    "san+mlp": lambda L, x: bert_post_mlp(L, L.attention.output.LayerNorm(bert_branch(L, x))),
    "san+skip": lambda L, x: L.attention.output.LayerNorm(x + bert_branch(L, x)),
    "wu:san": lambda L, x: bert_branch(L, x),
    "wu:san+skip": lambda L, x: x + bert_branch(L, x),
    "wu:san+ln": lambda L, x: L.attention.output.LayerNorm(bert_branch(L, x)),
}


@pytest.mark.parametrize("variant", sorted(BERT_BLOCKS))
def test_bert_variant_block_matches_hand_computation(make_tiny, ids, variant):
    loaded = make_tiny("bert")
    got = states(loaded, ids, variant)
    for layer, x, y in zip(loaded.model.encoder.layer, got[:-1], got[1:], strict=True):
        with torch.no_grad():
            expected = BERT_BLOCKS[variant](layer, x)
        torch.testing.assert_close(y, expected, rtol=1e-5, atol=1e-5)


def test_bert_san_layer_is_layernorm_of_attention_output_alone_exactly(make_tiny, ids):
    # The library's own attention module gives the branch; no rounding from a subtraction.
    loaded = make_tiny("bert")
    got = states(loaded, ids, "san")
    layer = loaded.model.encoder.layer[0]
    with torch.no_grad():
        context, _ = layer.attention.self(got[0])
        expected = layer.attention.output.LayerNorm(layer.attention.output.dense(context))
    assert torch.equal(got[1], expected)


def test_albert_san_skip_reuses_one_block_without_mlp(make_tiny, ids):
    loaded = make_tiny("albert")
    got = states(loaded, ids, "san+skip")
    block = loaded.model.encoder.albert_layer_groups[0].albert_layers[0]
    att = block.attention
    for x, y in itertools.pairwise(got):
        with torch.no_grad():
            context, _ = att(x)  # the library's attention sub-layer: LayerNorm(x + branch)
        assert torch.equal(y, context)


def test_albert_san_is_layernorm_of_branch(make_tiny, ids):
    loaded = make_tiny("albert")
    got = states(loaded, ids, "san")
    att = loaded.model.encoder.albert_layer_groups[0].albert_layers[0].attention
    with torch.no_grad():
        captured = {}
        h = att.output_dropout.register_forward_hook(lambda m, a, o: captured.update(b=o))
        att(got[0])
        h.remove()
        expected = att.LayerNorm(captured["b"])
    assert torch.equal(got[1], expected)


def gpt2_pre_mlp(block, y):
    return y + block.mlp(block.ln_2(y))


def gpt2_attention(block, x):
    out, _ = block.attn(x)
    return out


@pytest.mark.parametrize(
    "variant, by_hand",
    [
        ("san", lambda B, x: gpt2_attention(B, B.ln_1(x))),
        ("san+mlp", lambda B, x: gpt2_pre_mlp(B, gpt2_attention(B, B.ln_1(x)))),
        ("san+skip", lambda B, x: x + gpt2_attention(B, B.ln_1(x))),
        ("wu:san", lambda B, x: gpt2_attention(B, x)),
        ("wu:san+skip", lambda B, x: x + gpt2_attention(B, x)),
    ],
)
def test_gpt2_variant_block_matches_hand_computation(make_tiny, ids, variant, by_hand):
    loaded = make_tiny("gpt2")
    got = states(loaded, ids, variant)
    n = ids.shape[1]
    bias = torch.where(
        torch.ones(n, n, dtype=torch.bool).tril(), 0.0, torch.finfo(torch.float32).min
    )
    for block, x, y in zip(loaded.model.h, got[:-1], got[1:], strict=True):
        with torch.no_grad():
            # the causal mask, passed explicitly as the model does
            orig = block.attn.forward
            block.attn.forward = lambda hs, f=orig, **kw: f(hs, attention_mask=bias[None, None])
            try:
                expected = by_hand(block, x)
            finally:
                del block.attn.forward
        torch.testing.assert_close(y, expected, rtol=1e-5, atol=1e-5)


def test_llama_san_is_attention_of_normed_input_without_skip(make_tiny, ids):
    loaded = make_tiny("llama")
    captured = {}
    layer = loaded.model.layers[0]
    handle = layer.self_attn.register_forward_hook(lambda m, a, o: captured.update(out=o[0]))
    try:
        san = states(loaded, ids, "san")
        attn_san = captured["out"]
        full = states(loaded, ids, "transformer")
    finally:
        handle.remove()
    assert torch.equal(san[1], attn_san)  # no skip, MLP sub-layer is the identity
    assert torch.equal(san[0], full[0])


def test_xlnet_san_equals_the_library_post_attention_without_residual(make_tiny, ids):
    # XLNet's own switch: post_attention(..., residual=False) is LayerNorm of the branch alone.
    loaded = make_tiny("xlnet")
    ours = states(loaded, ids, "san")
    for layer in loaded.model.layer:
        original = layer.rel_attn.post_attention
        layer.rel_attn.post_attention = lambda h, v, residual=True, f=original: f(h, v, False)
        layer.ff.forward = lambda inp: inp  # the MLP sub-layer as the identity
    try:
        with torch.no_grad():
            ref = loaded.model(input_ids=ids, output_hidden_states=True).hidden_states
    finally:
        for layer in loaded.model.layer:
            del layer.rel_attn.post_attention, layer.ff.forward
    for a, b in zip(ours, ref, strict=True):
        assert torch.equal(a, b)


def test_transformer_variant_is_identity(tiny, ids):
    assert VARIANTS["transformer"].is_identity
    a = states(tiny, ids, "transformer")
    b = states(tiny, ids, "wu:transformer")
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def test_removing_the_skip_collapses_faster_than_keeping_it(make_tiny, ids):
    from rankcollapse.metrics import res_comp_rel

    loaded = make_tiny("bert")
    san = res_comp_rel(states(loaded, ids, "san")[-1]).mean()
    skip = res_comp_rel(states(loaded, ids, "san+skip")[-1]).mean()
    assert san < skip


def test_describe_names_modules_per_architecture():
    text = describe(VARIANTS["san"], ARCHITECTURES["llama"])
    assert "self_attn(input_layernorm(x))" in text and "pre-LN" in text
    assert "unchanged" in describe(VARIANTS["transformer"], ARCHITECTURES["xlnet"])


def test_unknown_variant_error_lists_known_variants():
    with pytest.raises(
        UnknownNameError, match="unknown variant 'san\\+mpl'.*Did you mean 'san\\+mlp'"
    ):
        parse_variant("san+mpl")


def test_dong_prefix_is_accepted():
    assert parse_variant("dong:san") is VARIANTS["san"]


def test_dong_authors_albert_without_mlp_keeps_a_gelu_and_a_residual(make_tiny, ids):
    # Dong et al.'s code made ffn and ffn_output identities: LN(GELU(y) + y), y = LN(branch).
    loaded = make_tiny("albert")
    block = loaded.model.encoder.albert_layer_groups[0].albert_layers[0]
    got = states(loaded, ids, "dong-authors:san")
    exact = states(loaded, ids, "san")
    captured = {}
    hook = block.attention.output_dropout.register_forward_hook(
        lambda m, a, o: captured.update(b=o)
    )
    for x, y in itertools.pairwise(got):
        with torch.no_grad():
            block.attention(x)
            mid = block.attention.LayerNorm(captured["b"])
            expected = block.full_layer_layer_norm(block.activation(mid) + mid)
        assert torch.equal(y, expected)
    hook.remove()
    assert not torch.allclose(got[-1], exact[-1])  # the quirk changes the numbers


@pytest.mark.parametrize("arch", ["bert", "xlnet"])
def test_dong_authors_surgery_of_bert_and_xlnet_is_the_exact_one(make_tiny, ids, arch):
    loaded = make_tiny(arch)
    for name in ["san", "san+mlp", "san+skip"]:
        authors = states(loaded, ids, f"dong-authors:{name}")
        for ours, theirs in zip(states(loaded, ids, name), authors, strict=True):
            assert torch.equal(ours, theirs)


def test_dong_authors_variants_are_refused_outside_their_families(make_tiny, ids):
    with pytest.raises(ConfigError, match="covers bert, albert and xlnet only.*Use 'san'"):
        states(make_tiny("gpt2"), ids, "dong-authors:san")


def test_variant_not_defined_for_a_model_whose_blocks_lack_the_part(make_tiny, ids):
    loaded = make_tiny("bert")
    for layer in loaded.model.encoder.layer:
        layer.attention.output.dropout = None  # a BERT-like model laid out differently
    with pytest.raises(
        ConfigError,
        match="variant 'san' is not defined for this bert model.*attention.output.dropout",
    ):
        run_batch(loaded, ids, on_layer=lambda c: None, settings=RunSettings("san"))
    assert not any(m._forward_hooks for m in loaded.model.modules())
