"""Freeze a real Hugging Face transformer at one input: an exact decomposition of the full model.

Going further than Dong et al. (who decompose pure attention networks), the whole pretrained
block is made linear in the embedding output X^0 for the given input by freezing, from the
model's own forward pass:

- every head's attention probabilities P_h (captured by `rankcollapse.hf.run_batch`);
- every LayerNorm's / RMSNorm's per-token scale 1 / sigma_i (a left diagonal factor; the
  centring, the gain and the shift stay as they are: right factors and a constant);
- every MLP's activation gate: a plain MLP's act(z) as g * z with g = act(z) / z per element
  (BERT's GELU, OPT's and T5's ReLU), a gated MLP's act(x W_gate) * (x W_up) with the
  act(x W_gate) factor as the gate (Llama, Gemma, Phi-3's fused gate_up_proj, T5 v1.1).

Whatever shapes the probabilities stays inside P_h and needs nothing else frozen: QK-norm (Qwen3,
OLMo 2), Gemma 2's logit soft-capping, query_pre_attn_scalar and sliding windows, T5's relative
position bias, DeBERTa-v2's disentangled and XLNet's relative attention, causal masks.

The MLP is one more branch of its sublayer (a path through it keeps its length, which counts
attention heads). Then  X^L = sum_k C_k + bias term  exactly, with X^L the last block's output
(the raw residual stream of pre-LN models: the final norm is not applied, as in `run_batch`).

Block shapes, as their adapter declares them (`Architecture.norm_position`, `branch_norms`,
`parallel`):
- post-LN (BERT, RoBERTa, XLM-RoBERTa, ELECTRA, DistilBERT, ALBERT, XLNet, DeBERTa-v2, OPT-350m):
  y = N_a(x + A(x)), z = N_m(y + M(y)); ALBERT's one block is frozen once per application;
- pre-LN (Llama, Mistral, Qwen2, Qwen3, Gemma, Phi-3, GPT-2, OPT, T5's encoder, ViT,
  GPT-NeoX without parallel residual): y = x + A(N_a(x)), z = y + M(N_m(y));
- sandwich norms (Gemma 2): y = x + N'_a(A(N_a(x))), each branch norm frozen like any norm, from
  the branch's total output; OLMo 2 has the branch-output norms N' only;
- parallel residual (GPT-NeoX): z = x + A(N_a(x)) + M(N_m(x)), both branches on the same x.
Value projections are cut out of fused ones (Phi-3's and GPT-2's q|k|v, GPT-NeoX's per-head
[q_h k_h v_h]); GPT-2's Conv1D stores its weight transposed; XLNet's are einsum Parameters.
Every registered family names its recipe (`Architecture.decompose`: where its MLP's parts
are); an adapter without one gets a clear error.

RMSNorm computes in float32 even in a float64 model (Gemma 2's eager attention its softmax too),
so the model's own output agrees with the decomposition only to float32 rounding unless the
norm is run in float64 (the tests do that with a forward hook); the reference recorded with the
probabilities always agrees to float64 rounding.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch
from torch import Tensor, nn

from rankcollapse.errors import UnknownNameError
from rankcollapse.hf import ARCHITECTURES, LoadedModel, RunSettings, run_batch
from rankcollapse.hf.architectures import Architecture, block_list, head_sizes, submodule
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
    norm: Any = module  # Llama's, T5's or Gemma's RMSNorm (transformers: untyped)
    eps: float = getattr(norm, "variance_epsilon", None) or norm.eps

    def token_scale(x: Tensor) -> Tensor:
        return torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)

    return FrozenNorm(token_scale, centre=False, gain=norm.weight + offset)


def _norm(block: nn.Module, path: str | None, arch: Architecture) -> FrozenNorm | None:
    """LayerNorm, or an RMSNorm (Llama's, T5's, Gemma's with its gain offset); None: no norm."""
    if path is None:
        return None
    module = submodule(block, path)
    if isinstance(module, nn.LayerNorm):
        return _layer_norm(module)
    return _rms_norm(module, arch.rms_gain_offset)


def _in_out(module: nn.Module, arch: Architecture) -> tuple[Tensor, Tensor | None]:
    """A projection's weight as (in, out) and its bias: Linear stores (out, in), GPT-2's
    Conv1D (in, out)."""
    projection: Any = module  # a Linear or Conv1D (transformers: untyped)
    weight: Tensor = projection.weight
    return (weight if arch.projection == "conv1d" else weight.T), projection.bias


def _projection(root: nn.Module, path: str, arch: Architecture) -> tuple[Tensor, Tensor | None]:
    """The (in, out) weight and the bias of the projection at `path`; XLNet's are einsum
    Parameters (d_model, n_heads, d_head) of its attention module, without bias."""
    if arch.projection == "einsum":
        parent, _, name = path.rpartition(".")
        weight = getattr(submodule(root, parent), name)
        return weight.reshape(weight.shape[0], -1), None
    return _in_out(submodule(root, path), arch)


def _value(attention: nn.Module, arch: Architecture, sizes) -> tuple[Tensor, Tensor | None]:
    """The value projection (d, n_kv * d_head) and its bias, cut out of a fused projection."""
    n_heads, n_kv, head_dim = sizes
    weight, bias = _projection(attention, arch.v, arch)
    if arch.fused_qkv == "concat":  # q, k, v outputs one after the other (Phi-3, GPT-2)
        start = (n_heads + n_kv) * head_dim
        weight, bias = weight[:, start:], None if bias is None else bias[start:]
    elif arch.fused_qkv == "per_head":  # [q_h k_h v_h] per head (GPT-NeoX)
        rows = slice(2 * head_dim, 3 * head_dim)
        weight = weight.reshape(-1, n_heads, 3 * head_dim)[..., rows].reshape(weight.shape[0], -1)
        bias = None if bias is None else bias.view(n_heads, 3 * head_dim)[:, rows].reshape(-1)
    return weight, bias


def _attention(loaded: LoadedModel, block: nn.Module, probs: Tensor) -> FrozenAttention:
    """Per-head value and output matrices (grouped-query heads share their key-value group's)."""
    config, arch = loaded.model.config, loaded.arch
    n_heads, n_kv, head_dim = sizes = head_sizes(config)
    group = torch.arange(n_heads) // (n_heads // n_kv)  # the key-value head of each query head
    weight, bias = _value(submodule(block, arch.attention), arch, sizes)
    w_out, b_out = _projection(block, arch.attention_out, arch)
    if arch.projection == "einsum":  # XLNet's o is (d_model, n_heads, d_head) as well
        w_out = w_out.T
    d_model = weight.shape[0]
    w_v = weight.reshape(d_model, n_kv, head_dim).transpose(0, 1)[group]  # (h, d, d_v)
    b_v = bias.view(n_kv, head_dim)[group] if bias is not None else None
    w_o = w_out.reshape(n_heads, head_dim, -1)  # (h, d_v, d)
    return FrozenAttention(probs, w_v, w_o, b_v, b_out)


# The MLP of each recipe, as module paths relative to a block. Plain: (first projection,
# activation, second projection), act(u W_in + b_in) W_out + b_out. Gated: (gate projection,
# activation, up projection, down projection), (act(u W_gate) * u W_up) W_down; Phi-3's gate and
# up projections are one Linear, gate rows first.
_PLAIN_MLP = {
    "bert": ("intermediate.dense", "intermediate.intermediate_act_fn", "output.dense"),
    "albert": ("ffn", "activation", "ffn_output"),
    "xlnet": ("ff.layer_1", "ff.activation_function", "ff.layer_2"),
    "distilbert": ("ffn.lin1", "ffn.activation", "ffn.lin2"),
    "gpt2": ("mlp.c_fc", "mlp.act", "mlp.c_proj"),
    "gpt_neox": ("mlp.dense_h_to_4h", "mlp.act", "mlp.dense_4h_to_h"),
    "opt": ("fc1", "activation_fn", "fc2"),
    "t5": ("layer.1.DenseReluDense.wi", "layer.1.DenseReluDense.act", "layer.1.DenseReluDense.wo"),
    "vit": ("mlp.fc1", "mlp.activation_fn", "mlp.fc2"),
}
_GATED_MLP = {
    "llama": ("mlp.gate_proj", "mlp.act_fn", "mlp.up_proj", "mlp.down_proj"),
    "phi3": ("mlp.gate_up_proj", "mlp.activation_fn", "mlp.gate_up_proj", "mlp.down_proj"),
    "t5-gated": (
        "layer.1.DenseReluDense.wi_0",
        "layer.1.DenseReluDense.act",
        "layer.1.DenseReluDense.wi_1",
        "layer.1.DenseReluDense.wo",
    ),
}


def _mlp(block: nn.Module, arch: Architecture, recipe: str) -> FrozenMLP:
    """The block's MLP, frozen by `recipe` (the adapter's `decompose`)."""
    if recipe == "t5" and hasattr(submodule(block, arch.mlp_branch), "wi_0"):
        recipe = "t5-gated"  # T5 v1.1, Flan-T5: a gated MLP
    if recipe in _PLAIN_MLP:
        first, act, second = (submodule(block, path) for path in _PLAIN_MLP[recipe])
        (w_in, b_in), (w_out, b_out) = _in_out(first, arch), _in_out(second, arch)
        return FrozenMLP(
            w_in=w_in,
            w_out=w_out,
            activation=act,
            b_in=b_in,
            b_out=b_out,
            slope_at_zero=0.5,  # GELU'(0); ReLU's gate at z == 0 multiplies 0 either way
        )
    gate, act, up, down = (submodule(block, path) for path in _GATED_MLP[recipe])
    (w_gate, b_gate), (w_up, b_up) = _in_out(gate, arch), _in_out(up, arch)
    if gate is up:  # Phi-3's fused gate_up_proj
        w_gate, w_up = w_gate.chunk(2, dim=-1)
        b_gate, b_up = (None, None) if b_gate is None else b_gate.chunk(2)
    w_down, b_down = _in_out(down, arch)
    return FrozenMLP(
        w_in=w_up,
        w_out=w_down,
        activation=act,
        b_in=b_up,
        b_out=b_down,
        w_gate=w_gate,
        b_gate=b_gate,
    )


def _sublayers(loaded: LoadedModel, block: nn.Module, probs: Tensor, recipe: str) -> list[Sublayer]:
    """One block as frozen sublayers, in the block shape its adapter declares.

    post-LN: x -> N_a(x + A(x)) -> N_m(. + M(.)); pre-LN: x + A(N_a(x)), then + M(N_m(.));
    sandwich and branch-output norms (Gemma 2, OLMo 2): x + N'_a(A(N_a(x))), N_a optional;
    parallel residual (GPT-NeoX): x + A(N_a(x)) + M(N_m(x)).
    """
    arch = loaded.arch
    attention, mlp = _attention(loaded, block, probs), _mlp(block, arch, recipe)
    if arch.norm_position == "post":
        return [
            Sublayer(attention, 1.0, norm_out=_norm(block, arch.attention_norm, arch)),
            Sublayer(mlp, 1.0, norm_out=_norm(block, arch.mlp_norm, arch)),
        ]
    after_attention, after_mlp = arch.branch_norms or (None, None)
    attention_part = Sublayer(
        attention,
        1.0,
        norm_in=_norm(block, arch.attention_norm, arch),
        norm_branch=_norm(block, after_attention, arch),
    )
    mlp_part = Sublayer(
        mlp,
        0.0 if arch.parallel else 1.0,
        norm_in=_norm(block, arch.mlp_norm, arch),
        norm_branch=_norm(block, after_mlp, arch),
    )
    if arch.parallel:
        return [replace(attention_part, parallel=mlp_part)]
    return [attention_part, mlp_part]


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
    recipe = loaded.arch.decompose
    if recipe is None:  # not `decomposable`
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

    run_batch(loaded, input_ids, token_mask, on_layer=keep, settings=RunSettings(attention=True))
    blocks = block_list(loaded.model, loaded.arch)
    if loaded.arch.shared_layers:  # ALBERT: its one block, applied n_layers times
        blocks = blocks * loaded.n_layers
    sublayers = [
        sub
        for block, probs in zip(blocks, attention, strict=True)
        for sub in _sublayers(loaded, block, probs.to(states[0].dtype), recipe)
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
