"""Exact decomposition of real Hugging Face models (tiny random configs, float64)."""

import pytest
import torch
import transformers as tf

from rankcollapse.errors import UnknownNameError
from rankcollapse.hf import wrap_model
from rankcollapse.paths import decompose_by_length, freeze_real, length_frame


def _tiny_bert():
    torch.manual_seed(0)
    config = tf.BertConfig(
        hidden_size=32,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=64,
        vocab_size=100,
    )
    return wrap_model(tf.BertModel(config).eval().double(), name="tiny-bert")


def _tiny_llama():
    torch.manual_seed(0)
    config = tf.LlamaConfig(
        hidden_size=32,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
        vocab_size=100,
    )
    model = tf.LlamaModel(config).eval().double()

    def float64_rms_norm(module, args, output):
        # Llama's RMSNorm computes in float32 whatever the model dtype; redo it in float64 so
        # the real output is float64-exact and comparable to float64 precision.
        x = args[0]
        return (
            module.weight
            * x
            * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + module.variance_epsilon)
        )

    for module in model.modules():
        if type(module).__name__.endswith("RMSNorm"):
            module.register_forward_hook(float64_rms_norm)
    return wrap_model(model, name="tiny-llama")


@pytest.mark.parametrize("make", [_tiny_bert, _tiny_llama], ids=["bert", "llama"])
def test_per_length_components_plus_bias_equal_the_real_output(make):
    loaded = make()
    ids = torch.randint(100, (2, 7), generator=torch.Generator().manual_seed(1))
    frozen = freeze_real(loaded, ids)
    with torch.no_grad():
        library_output = loaded.model(ids).last_hidden_state
    result = decompose_by_length(frozen)
    assert result.components.shape == (4, 2, 7, 32)
    scale = frozen.reference.abs().max()
    if loaded.arch.name == "bert":  # post-LN: the last block output is the model's output
        assert (frozen.reference - library_output).abs().max() / scale < 1e-14
    assert (result.output - frozen.reference).abs().max() / scale < 1e-13


def test_shares_of_all_lengths_and_the_bias_add_up_to_one():
    loaded = _tiny_bert()
    frozen = freeze_real(
        loaded, torch.randint(100, (2, 6), generator=torch.Generator().manual_seed(2))
    )
    frame = length_frame(decompose_by_length(frozen))
    shares = frame.query("metric == 'share'").groupby("sample")["value"].sum()
    assert shares.tolist() == pytest.approx([1.0, 1.0], abs=1e-12)
    assert set(frame["metric"]) >= {"norm", "norm_ratio", "share", "res_comp_rel"}


def test_unsupported_architecture_names_the_supported_ones():
    config = tf.GPT2Config(n_embd=32, n_layer=2, n_head=2, vocab_size=100)
    loaded = wrap_model(tf.GPT2Model(config).eval(), name="tiny-gpt2")
    with pytest.raises(UnknownNameError, match="gpt2.*supported architectures: llama, .*bert"):
        freeze_real(loaded, torch.zeros(1, 4, dtype=torch.long))
