"""Freeze a real Hugging Face transformer at one input: an exact decomposition of the full model.

Going further than Dong et al. (who decompose pure attention networks), the whole pretrained
block is made linear in the embedding output X^0 for the given input by freezing, from the
model's own forward pass:

- every head's attention probabilities P_h (captured by `rankcollapse.hf.run_batch`);
- every LayerNorm's / RMSNorm's per-token scale 1 / sigma_i (a left diagonal factor; the
  centring, the gain and the shift stay as they are: right factors and a constant);
- every MLP's activation gate: BERT's GELU(z) as g * z with g = GELU(z) / z per element, and
  Llama's gated MLP SiLU(x W_gate) * (x W_up) with the SiLU(x W_gate) factor as the gate.

The MLP is one more branch of its sublayer (a path through it keeps its length, which counts
attention heads). Then  X^L = sum_k C_k + bias term  exactly, with X^L the last block's output
(the raw residual stream for pre-LN Llama: the final norm is not applied, as in `run_batch`).

Supported: the families whose adapter names a recipe (`Architecture.decompose`): BERT-like
encoders (BERT, RoBERTa, XLM-RoBERTa, ELECTRA, MiniLM; post-LN) and Llama-like decoders (Llama,
SmolLM2, Mistral, Qwen2, Qwen3, Gemma; pre-RMSNorm, grouped-query attention; Qwen3's QK-norm and
Gemma's embedding scale act before the frozen parts). RMSNorm computes in float32 even in a
float64 model, so its outputs agree with the decomposition only to float32 rounding unless the
norm is run in float64 (the tests do that with a forward hook).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from rankcollapse.errors import UnknownNameError
from rankcollapse.hf import ARCHITECTURES, LoadedModel, run_batch
from rankcollapse.hf.architectures import block_list, head_sizes, submodule
from rankcollapse.hf.models import as_loaded
from rankcollapse.paths.decompose import LengthDecomposition, decompose_by_length
from rankcollapse.paths.frozen import FrozenAttention, FrozenMLP, FrozenNet, FrozenNorm, Sublayer

#: Families (names of `rankcollapse.hf.ARCHITECTURES`) that `freeze_real` decomposes.
DECOMPOSABLE = tuple(name for name, arch in ARCHITECTURES.items() if arch.decomposable)


def _layer_norm(module: nn.LayerNorm) -> FrozenNorm:
    eps = module.eps

    def token_scale(x: Tensor) -> Tensor:
        return torch.rsqrt(x.var(-1, unbiased=False, keepdim=True) + eps)

    return FrozenNorm(token_scale, centre=True, gain=module.weight, shift=module.bias)


def _rms_norm(module: nn.Module, offset: float = 0.0) -> FrozenNorm:
    eps = getattr(module, "variance_epsilon", None) or module.eps

    def token_scale(x: Tensor) -> Tensor:
        return torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)

    return FrozenNorm(token_scale, centre=False, gain=module.weight + offset)


def _attention(loaded: LoadedModel, block: nn.Module, probs: Tensor) -> FrozenAttention:
    """Per-head value and output matrices (grouped-query heads share their key-value group's)."""
    config, arch = loaded.model.config, loaded.arch
    n_heads, n_kv, head_dim = head_sizes(config)
    group = torch.arange(n_heads) // (n_heads // n_kv)  # the key-value head of each query head
    value = submodule(submodule(block, arch.attention), arch.v)
    out = submodule(block, arch.attention_out)
    d_model = value.weight.shape[1]
    w_v = value.weight.view(n_kv, head_dim, d_model).transpose(1, 2)[group]  # (h, d, d_v)
    b_v = value.bias.view(n_kv, head_dim)[group] if value.bias is not None else None
    w_o = out.weight.view(d_model, n_heads, head_dim).permute(1, 2, 0)  # (h, d_v, d)
    return FrozenAttention(probs, w_v, w_o, b_v, out.bias)


def _bert_sublayers(loaded: LoadedModel, block: nn.Module, probs: Tensor) -> list[Sublayer]:
    arch = loaded.arch
    intermediate, output = (submodule(block, path) for path in arch.mlp)
    mlp = FrozenMLP(
        w_in=intermediate.dense.weight.T,
        w_out=output.weight.T,
        activation=intermediate.intermediate_act_fn,
        b_in=intermediate.dense.bias,
        b_out=output.bias,
        slope_at_zero=0.5,  # GELU'(0)
    )
    return [  # post-LN: LayerNorm(x + branch)
        Sublayer(
            _attention(loaded, block, probs),
            1.0,
            norm_out=_layer_norm(submodule(block, arch.attention_norm)),
        ),
        Sublayer(mlp, 1.0, norm_out=_layer_norm(submodule(block, arch.mlp_norm))),
    ]


def _llama_sublayers(loaded: LoadedModel, block: nn.Module, probs: Tensor) -> list[Sublayer]:
    arch = loaded.arch
    offset = arch.rms_gain_offset
    gated = submodule(block, arch.mlp[0])
    mlp = FrozenMLP(
        w_in=gated.up_proj.weight.T,
        w_out=gated.down_proj.weight.T,
        activation=gated.act_fn,
        b_in=gated.up_proj.bias,
        b_out=gated.down_proj.bias,
        w_gate=gated.gate_proj.weight.T,
        b_gate=gated.gate_proj.bias,
    )
    return [  # pre-LN: x + branch(RMSNorm(x))
        Sublayer(
            _attention(loaded, block, probs),
            1.0,
            norm_in=_rms_norm(submodule(block, arch.attention_norm), offset),
        ),
        Sublayer(mlp, 1.0, norm_in=_rms_norm(submodule(block, arch.mlp_norm), offset)),
    ]


_SUBLAYERS = {"bert": _bert_sublayers, "llama": _llama_sublayers}


@torch.no_grad()
def freeze_real(
    loaded: LoadedModel | nn.Module, input_ids: Tensor, token_mask: Tensor | None = None
) -> FrozenNet:
    """The full model frozen at `input_ids` (b, n): input X^0 = embedding output, reference =
    the last block's output, both from one forward pass of the unmodified model.

    `token_mask` (b, n) marks real tokens; the model masks pads out of attention and the
    decomposition stays exact at every position, pads included (tables built from it measure
    every position, so pass windows without pads, as `load_windows` gives).

    Raises:
        UnknownNameError: for an architecture outside `DECOMPOSABLE`.
    """
    loaded = as_loaded(loaded)
    if not loaded.arch.decomposable:
        raise UnknownNameError(
            f"path decomposition of '{loaded.name}' ({loaded.arch.name}) is not supported; "
            f"supported architectures: {', '.join(DECOMPOSABLE)}. Use a model of those "
            "families, or a toy network."
        )
    states: list[Tensor] = []
    attention: list[Tensor] = []

    def keep(capture) -> None:
        states.append(capture.states.detach().clone())
        if capture.attention is not None:
            attention.append(capture.attention.detach().clone())

    run_batch(loaded, input_ids, token_mask, on_layer=keep, attention=True)
    blocks = block_list(loaded.model, loaded.arch)
    sublayers = [
        sub
        for block, probs in zip(blocks, attention)
        for sub in _SUBLAYERS[loaded.arch.decompose](loaded, block, probs.to(states[0].dtype))
    ]
    return FrozenNet(states[0], sublayers, reference=states[-1])


def decompose_real(
    model: LoadedModel | nn.Module, input_ids: Tensor, token_mask: Tensor | None = None
) -> LengthDecomposition:
    """Per-length path totals of a real model at `input_ids`: `freeze_real`, then
    `decompose_by_length` (Dong, Cordonnier, Loukas 2021, Sec. 3).

    `model` may be a Hugging Face model in memory (base model or one with a head); it is used
    as it is and left as it was.

    Example:
        >>> import transformers as tf
        >>> cfg = tf.LlamaConfig(hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        ...                      intermediate_size=32, vocab_size=20)
        >>> model = tf.LlamaForCausalLM(cfg).eval()
        >>> parts = decompose_real(model, torch.arange(6)[None])
        >>> parts.components.shape, model.config._attn_implementation
        (torch.Size([3, 1, 6, 16]), 'sdpa')
    """
    return decompose_by_length(freeze_real(model, input_ids, token_mask))
