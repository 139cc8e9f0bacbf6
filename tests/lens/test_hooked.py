"""A TransformerLens HookedTransformer (3.x; 4.0 removed it) built from its config (no hub),
float64: the states and patterns `run_hooked` streams are those of `run_with_cache`; variants,
masks and temperature are what they say; hooks, modes and the config are put back, also after
an error."""

from __future__ import annotations

import pytest
import torch
from lens_models import hooked_lens, hooked_transformer

from rankcollapse.errors import ConfigError
from rankcollapse.hf import RunSettings
from rankcollapse.lens import as_hooked, is_hooked_transformer, run_hooked
from rankcollapse.masks import causal, window

hooked_lens()  # TransformerLens 4 removed HookedTransformer: the module skips, saying so
pytestmark = pytest.mark.filterwarnings("ignore:HookedTransformer is deprecated:DeprecationWarning")


def ids(b: int = 2, n: int = 8) -> torch.Tensor:
    return torch.randint(50, (b, n), generator=torch.Generator().manual_seed(1))


def stream(
    model, tokens, token_mask=None, **options
) -> dict[int, tuple[torch.Tensor, torch.Tensor | None]]:
    seen = {}

    def on_layer(c):
        seen[c.layer] = (c.states.clone(), c.attention)

    run_hooked(
        as_hooked(model), tokens, token_mask, on_layer=on_layer, settings=RunSettings(**options)
    )
    return seen


def forward_hooks(model) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


@pytest.mark.parametrize("overrides", [{}, {"attn_only": True}, {"normalization_type": "RMS"}])
def test_states_and_patterns_are_those_of_run_with_cache(overrides):
    model = hooked_transformer(**overrides)
    _, cache = model.run_with_cache(ids())
    seen = stream(model, ids(), attention=True)
    assert sorted(seen) == [0, 1, 2, 3]
    torch.testing.assert_close(seen[0][0], cache["blocks.0.hook_resid_pre"], atol=1e-12, rtol=0)
    assert seen[0][1] is None
    for layer in (1, 2, 3):
        states, pattern = seen[layer]
        expected = cache[f"blocks.{layer - 1}.hook_resid_post"]
        torch.testing.assert_close(states, expected, atol=1e-12, rtol=0)
        expected = cache[f"blocks.{layer - 1}.attn.hook_pattern"]
        torch.testing.assert_close(pattern, expected, atol=1e-12, rtol=0)


def test_san_skip_zeroes_the_mlp_and_san_keeps_only_the_attention_branch():
    model = hooked_transformer()
    tokens = ids()
    skip = stream(model, tokens, variant="san+skip")
    for layer in (1, 2, 3):  # x_l = x_{l-1} + A(LN1(x_{l-1})), computed here from the block
        block, x = model.blocks[layer - 1], skip[layer - 1][0]
        h = block.ln1(x)
        expected = x + block.attn(query_input=h, key_input=h, value_input=h)
        torch.testing.assert_close(skip[layer][0], expected, atol=1e-12, rtol=0)
    san = stream(model, tokens, variant="wu:san")  # no skip, no MLP, no norms: x_l = A(x_{l-1})
    for layer in (1, 2, 3):
        block, x = model.blocks[layer - 1], san[layer - 1][0]
        expected = block.attn(query_input=x, key_input=x, value_input=x)
        torch.testing.assert_close(san[layer][0], expected, atol=1e-12, rtol=0)


def test_an_attention_only_model_is_its_own_san_skip():
    model = hooked_transformer(attn_only=True)
    as_is, skip = stream(model, ids()), stream(model, ids(), variant="san+skip")
    for layer in as_is:
        assert torch.equal(as_is[layer][0], skip[layer][0])
    assert not torch.allclose(stream(model, ids(), variant="san")[3][0], as_is[3][0])


def test_temperature_and_mask_reach_the_softmax():
    model = hooked_transformer()
    tokens = ids()
    _, cache = model.run_with_cache(tokens)
    scores = cache["blocks.0.attn.hook_attn_scores"]  # causal, -inf above the diagonal
    hot = stream(model, tokens, temperature=2.0, attention=True)[1][1]
    torch.testing.assert_close(hot, torch.softmax(scores / 2.0, -1), atol=1e-12, rtol=0)
    allowed = window(8, 1)  # a band, future neighbour included: the causal mask is replaced
    banded = stream(model, tokens, mask=allowed, attention=True)[1][1]
    assert bool((banded[..., ~allowed] == 0).all())
    assert bool((banded[..., 0, 1] > 0).all()), "the key after the query is allowed now"
    torch.testing.assert_close(banded.sum(-1), torch.ones_like(banded.sum(-1)))
    assert model.cfg.attention_dir == "causal"


def test_pads_never_enter_as_keys():
    model = hooked_transformer()
    mask = torch.ones(2, 8, dtype=torch.bool)
    mask[1, 5:] = False
    pattern = stream(model, ids(), token_mask=mask, attention=True)[2][1]
    assert bool((pattern[1, :, :, 5:] == 0).all())
    full = stream(model, ids(), attention=True)[2][1]
    torch.testing.assert_close(pattern[0], full[0], atol=1e-12, rtol=0)
    # the real tokens of the padded sample see what they see alone (causal: pads come later)
    alone = stream(model, ids()[1:, :5], attention=True)[2][1]
    torch.testing.assert_close(pattern[1, :, :5, :5], alone[0], atol=1e-12, rtol=0)


def test_hooks_modes_and_config_are_put_back_also_after_an_error():
    model = hooked_transformer().train()
    model.blocks[0].eval()

    def fail(capture):
        if capture.layer == 2:
            raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        settings = RunSettings("wu:san", causal(8), temperature=3.0, attention=True)
        run_hooked(as_hooked(model), ids(), on_layer=fail, settings=settings)
    assert forward_hooks(model) == 0
    assert model.training and not model.blocks[0].training and model.blocks[1].training
    assert model.cfg.attention_dir == "causal"


@pytest.mark.parametrize(
    ("variant", "overrides", "reason"),
    [
        ("dong-authors:san", {}, "authors' surgery"),
        ("san+mlp", {"attn_only": True}, "attention-only"),
        ("san", {"parallel_attn_mlp": True}, "parallel"),
    ],
)
def test_a_variant_its_hook_points_cannot_realise_is_refused_with_the_reason(
    variant, overrides, reason
):
    with pytest.raises(ConfigError, match=reason):
        run_hooked(
            as_hooked(hooked_transformer(**overrides)),
            ids(),
            on_layer=lambda c: None,
            settings=RunSettings(variant),
        )


def test_the_class_check_knows_a_hooked_transformer():
    assert is_hooked_transformer(hooked_transformer())
    assert not is_hooked_transformer(torch.nn.Linear(2, 2))
