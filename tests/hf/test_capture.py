"""Captured states versus the library's own output_hidden_states; masks and temperature injected."""

import pytest
import torch

from rankcollapse.errors import ConfigError, InputError
from rankcollapse.hf import RunSettings, run_batch
from rankcollapse.masks import causal, causal_window, window

VOCAB = 60  # as in conftest.py


def capture(loaded, ids, **kw):
    got = []
    run_batch(loaded, ids, on_layer=got.append, settings=RunSettings(**kw))
    return got


def library_states(loaded, ids):
    with torch.no_grad():
        return loaded.model(input_ids=ids, output_hidden_states=True).hidden_states


@pytest.mark.parametrize("attention", [False, True], ids=["own-attention", "custom-attention"])
def test_transformer_states_equal_output_hidden_states_exactly(tiny, ids, attention):
    # Same (eager) attention implementation on both sides; attention=True switches the model to
    # the custom attention function, which must reproduce eager bit for bit.
    got = capture(tiny, ids, attention=attention)
    ref = library_states(tiny, ids)
    assert [c.layer for c in got] == list(range(tiny.n_layers + 1))
    last = len(ref) - 1
    for c, r in zip(got[:last], ref[:last], strict=True):
        assert torch.equal(c.states, r)
    final = got[-1].states
    if tiny.arch.final_norm:  # pre-LN: the library's last entry has the final norm applied
        final = tiny.model.get_submodule(tiny.arch.final_norm)(final)
    assert torch.equal(final, ref[-1])


def test_attention_probabilities_are_row_stochastic_per_layer(tiny, ids):
    got = capture(tiny, ids, attention=True)
    assert got[0].attention is None
    for c in got[1:]:
        assert c.attention.shape[0] == 2 and c.attention.shape[-2:] == (7, 7)
        torch.testing.assert_close(c.attention.sum(-1), torch.ones(c.attention.shape[:-1]))


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_decoders_stay_causal_under_custom_attention(make_tiny, arch, ids):
    # a known trap: a custom attention name must not turn a decoder bidirectional.
    loaded = make_tiny(arch)
    probs = capture(loaded, ids, attention=True)[1].attention
    assert torch.all(probs.triu(diagonal=1) == 0)


def perturbed(ids, position):
    other = ids.clone()
    other[:, position] = (other[:, position] + 1) % VOCAB
    return other


@pytest.mark.parametrize("arch", ["bert", "albert", "gpt2", "llama"])
def test_injected_causal_mask_hides_later_tokens(make_tiny, arch, ids):
    loaded = make_tiny(arch)
    a = capture(loaded, ids, mask=causal(7))[-1].states
    b = capture(loaded, perturbed(ids, 5), mask=causal(7))[-1].states
    assert torch.equal(a[:, :5], b[:, :5])
    assert not torch.allclose(a[:, 5:], b[:, 5:])


@pytest.mark.parametrize("arch", ["bert", "llama"])
def test_injected_window_mask_hides_tokens_outside_the_receptive_field(make_tiny, arch, ids):
    # Two layers of a +-1 window: token i sees tokens i-2 .. i+2; token 6 is invisible to 0..3.
    loaded = make_tiny(arch)
    a = capture(loaded, ids, mask=window(7, 1))[-1].states
    b = capture(loaded, perturbed(ids, 6), mask=window(7, 1))[-1].states
    assert torch.equal(a[:, :4], b[:, :4])
    assert not torch.allclose(a[:, 4:], b[:, 4:])


def test_injected_mask_replaces_the_decoder_pattern(make_tiny, ids):
    loaded = make_tiny("gpt2")
    probs = capture(loaded, ids, mask=causal_window(7, 1), attention=True)[1].attention
    allowed = causal_window(7, 1)
    assert torch.all(probs[..., ~allowed] == 0)
    assert torch.all(probs[..., allowed] > 0)


def test_high_temperature_makes_attention_uniform(make_tiny, ids):
    loaded = make_tiny("bert")
    probs = capture(loaded, ids, temperature=1e9, attention=True)[1].attention
    torch.testing.assert_close(probs, torch.full_like(probs, 1 / 7))


def test_temperature_one_changes_nothing(make_tiny, ids):
    loaded = make_tiny("llama")
    a = capture(loaded, ids)[-1].states
    b = capture(loaded, ids, temperature=1.0, attention=True)[-1].states
    assert torch.equal(a, b)


def test_train_mode_turns_dropout_on_and_restores_eval(make_tiny, ids):
    loaded = make_tiny("bert")
    a = capture(loaded, ids, train_mode=True)[-1].states
    b = capture(loaded, ids, train_mode=True)[-1].states
    assert not torch.equal(a, b)
    assert not loaded.model.training


def test_mask_of_wrong_size_is_rejected(make_tiny, ids):
    with pytest.raises(InputError, match="the mask is for 9 tokens .* but the input has 7 tokens"):
        capture(make_tiny("bert"), ids, mask=causal(9))


def test_xlnet_rejects_masks_and_temperature(make_tiny, ids):
    with pytest.raises(ConfigError, match="xlnet.*does not support masks or temperature"):
        capture(make_tiny("xlnet"), ids, mask=causal(7))


def test_hooks_are_removed_after_a_run(tiny, ids):
    capture(tiny, ids, variant="san", attention=True)
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in tiny.model.modules())


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_decoders_build_no_key_value_cache(make_tiny, arch, ids, monkeypatch):
    from transformers.cache_utils import DynamicLayer

    cached = []
    update = DynamicLayer.update
    monkeypatch.setattr(
        DynamicLayer,
        "update",
        lambda self, *args, **kw: cached.append(1) or update(self, *args, **kw),
    )
    loaded = make_tiny(arch)
    library_states(loaded, ids)  # the library's own forward fills a cache layer by layer
    assert len(cached) == loaded.n_layers
    capture(loaded, ids)
    assert len(cached) == loaded.n_layers  # the capture added none
