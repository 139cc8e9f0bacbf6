"""Exact decomposition of real Hugging Face models: every registered family, tiny, float64."""

import dataclasses

import pytest
import torch
from torch import nn

from rankcollapse.errors import UnknownNameError
from rankcollapse.hf import ARCHITECTURES, run_batch, wrap_model
from rankcollapse.hf.models import tiny_model
from rankcollapse.hf.registry import VOCAB
from rankcollapse.paths import (
    DECOMPOSABLE,
    decompose_by_length,
    enumerate_paths,
    freeze_real,
    length_frame,
)


def _float64_norms(model: nn.Module, offset: float) -> None:
    """RMSNorms (Llama's, T5's, Gemma's: gain offset + weight) compute in float32 whatever the
    model dtype; redo them in float64 so the real output is comparable to float64 precision."""
    for module in model.modules():
        if isinstance(module, nn.LayerNorm) or not type(module).__name__.endswith(
            ("RMSNorm", "T5LayerNorm")
        ):
            continue
        eps = getattr(module, "variance_epsilon", None) or module.eps

        def float64_rms_norm(module, args, output, eps=eps):
            x = args[0]
            return (offset + module.weight) * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)

        module.register_forward_hook(float64_rms_norm)


def _tiny64(family: str, model: nn.Module | None = None):
    model = tiny_model(family, dtype=torch.float64) if model is None else model.double().eval()
    _float64_norms(model, ARCHITECTURES[family].rms_gain_offset)
    return wrap_model(model, name=f"tiny-{family}")


def _inputs(loaded, seed=1):
    gen = torch.Generator().manual_seed(seed)
    if loaded.arch.inputs == "pixels":
        size = loaded.model.config.image_size
        return torch.randn(2, 3, size, size, generator=gen, dtype=torch.float64)
    return torch.randint(3, VOCAB, (2, 7), generator=gen)


def _last_state(loaded, inputs):
    """The last block's output with the model's own attention implementation."""
    got = []
    run_batch(loaded, inputs, on_layer=got.append)
    return got[-1].states


def _relative_error(a, b):
    return float((a - b).abs().max() / b.abs().max())


def test_every_registered_family_is_decomposable():
    assert set(DECOMPOSABLE) == set(ARCHITECTURES)


@pytest.mark.parametrize("family", sorted(ARCHITECTURES))
def test_per_length_components_plus_bias_equal_the_real_output(family):
    loaded = _tiny64(family)
    inputs = _inputs(loaded)
    frozen = freeze_real(loaded, inputs)
    result = decompose_by_length(frozen)
    n_tokens = frozen.x.shape[1]
    assert result.components.shape == (loaded.n_layers + 1, 2, n_tokens, 32)
    assert _relative_error(result.output, frozen.reference) < 1e-13
    # The reference (recorded with the probabilities) is the model's own output. A library
    # eager attention (Gemma 2's default in transformers 5.24) runs its softmax in float32 even
    # in a float64 model; Gemma 2's soft-capped sdpa path (its default in 5.17) is off by 1e-9.
    eager = loaded.model.config._attn_implementation == "eager" and loaded.arch.attention_interface
    inexact = eager or family == "gemma2"
    own = _last_state(loaded, inputs)
    assert _relative_error(frozen.reference, own) < (1e-6 if inexact else 1e-13)


@pytest.mark.parametrize("family", ["gpt_neox", "gemma2", "olmo2", "phi3"])
def test_enumerated_paths_add_up_to_the_per_length_totals(family):
    """Parallel residual, sandwich norms, branch-output norms, fused projections: each path's
    term enumerated separately sums, length by length, to the recursion's totals."""
    loaded = _tiny64(family)
    frozen = freeze_real(loaded, _inputs(loaded)[:1, :5])
    by_length = decompose_by_length(frozen)
    enumerated = enumerate_paths(frozen)
    n_heads = loaded.model.config.num_attention_heads
    per_block = n_heads + 2 if loaded.arch.parallel else (n_heads + 1) * 2
    assert len(enumerated.paths) == per_block**2
    totals = torch.stack(
        [enumerated.terms[enumerated.lengths == k].sum(0) for k in range(loaded.n_layers + 1)]
    )
    assert _relative_error(totals, by_length.components) < 1e-12
    torch.testing.assert_close(enumerated.bias, by_length.bias, rtol=1e-12, atol=1e-14)


def test_gated_t5_mlp_decomposes_exactly():
    import transformers as tf

    config = tf.T5Config(
        d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, vocab_size=VOCAB,
        feed_forward_proj="gated-gelu",
    )  # fmt: skip
    torch.manual_seed(0)
    loaded = _tiny64("t5", tf.T5EncoderModel(config))
    frozen = freeze_real(loaded, _inputs(loaded))
    assert frozen.sublayers[1].branch.w_gate is not None
    assert _relative_error(decompose_by_length(frozen).output, frozen.reference) < 1e-13


def test_shares_of_all_lengths_and_the_bias_add_up_to_one():
    loaded = _tiny64("bert")
    frozen = freeze_real(loaded, _inputs(loaded, seed=2))
    frame = length_frame(decompose_by_length(frozen))
    shares = frame.query("metric == 'share'").groupby("sample")["value"].sum()
    assert shares.tolist() == pytest.approx([1.0, 1.0], abs=1e-12)
    assert set(frame["metric"]) >= {"norm", "norm_ratio", "share", "res_comp_rel"}


def test_an_adapter_without_a_recipe_names_the_supported_ones():
    loaded = wrap_model(tiny_model("gpt2"), name="tiny-gpt2")
    loaded = dataclasses.replace(loaded, arch=dataclasses.replace(loaded.arch, decompose=None))
    with pytest.raises(UnknownNameError, match="gpt2.*supported architectures: llama, .*bert"):
        freeze_real(loaded, torch.zeros(1, 4, dtype=torch.long))
