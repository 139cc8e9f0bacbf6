"""Architecture adapters: where each part of a Hugging Face model lives.

An adapter declares, it does not compute. Every adapter fills the same canonical parts, as
dotted module paths:

- `layers`: the list of transformer blocks, relative to the base model (the model without a head).
- `attention`: relative to a block, the module that calls the attention function (and owns the
  query/key/value projections `q`, `k`, `v`, relative to `attention`).
- `attention_out`: relative to a block, the output projection of the attention branch.
- `attention_branch`: relative to a block, the last module of the attention branch before the
  residual add (its output is the branch alone; variants capture it to drop the skip exactly).
- `attention_norm`: relative to a block, the norm of the attention sub-layer (post-LN: after the
  skip; pre-LN: before the attention).
- `mlp`: relative to a block, the MLP module(s) in call order.
- `mlp_norm`: relative to a block, the norm of the MLP sub-layer.
- `final_norm`: relative to the base model, the norm applied after the last block (pre-LN only).
- `norm_position`: "post" (norm after each skip: BERT, ALBERT, XLNet) or "pre" (norm at the
  start of each branch: GPT-2, Llama).

Flags record quirks: `shared_layers` (ALBERT reuses one block at every depth), `seq_first`
(XLNet keeps states as (n, b, d)), `attention_interface` (False for XLNet, whose relative
attention does not go through `transformers.AttentionInterface`), `causal` (decoders).

Example:
    >>> ARCHITECTURES["bert"].norm_position
    'post'
    >>> sorted(ARCHITECTURES)
    ['albert', 'bert', 'gpt2', 'llama', 'xlnet']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from torch import nn

from rankcollapse.errors import UnknownNameError


@dataclass(frozen=True)
class Architecture:
    """Where the residual stream, the attention branch, the MLP branch and the norms are."""

    name: str
    model_types: tuple[str, ...]
    layers: str
    attention: str
    q: str
    k: str
    v: str
    attention_out: str
    attention_branch: str
    attention_norm: str
    mlp: tuple[str, ...]
    mlp_norm: str
    norm_position: Literal["pre", "post"]
    final_norm: str | None = None
    causal: bool = False
    shared_layers: bool = False
    seq_first: bool = False
    attention_interface: bool = True
    notes: str = ""


BERT = Architecture(
    name="bert",
    model_types=("bert", "roberta"),  # MiniLM (all-MiniLM-L6-v2) is a BERT model
    layers="encoder.layer",
    attention="attention.self",
    q="query",
    k="key",
    v="value",
    attention_out="attention.output.dense",
    attention_branch="attention.output.dropout",
    attention_norm="attention.output.LayerNorm",  # post-LN: LayerNorm(branch + skip)
    mlp=("intermediate", "output.dense"),
    mlp_norm="output.LayerNorm",  # post-LN: LayerNorm(mlp + attention sub-layer output)
    norm_position="post",
)

ALBERT = Architecture(
    name="albert",
    model_types=("albert",),
    # One block, applied num_hidden_layers times: layer l of a probe is the l-th application.
    layers="encoder.albert_layer_groups.0.albert_layers",
    attention="attention",
    q="query",
    k="key",
    v="value",
    attention_out="attention.dense",
    attention_branch="attention.output_dropout",
    attention_norm="attention.LayerNorm",
    mlp=("ffn", "ffn_output"),  # the GELU between them is a function, not a module
    mlp_norm="full_layer_layer_norm",
    norm_position="post",
    shared_layers=True,
    notes="one shared block; layer 0 is the output of embedding_hidden_mapping_in (E -> hidden)",
)

XLNET = Architecture(
    name="xlnet",
    model_types=("xlnet",),
    layers="layer",
    attention="rel_attn",
    q="q",  # q, k, v, o are nn.Parameters of rel_attn (einsum weights), not Linear modules
    k="k",
    v="v",
    attention_out="rel_attn.o",
    # rel_attn.dropout is applied twice per block: to the attention probabilities, then to the
    # branch output; its last call before rel_attn.layer_norm is the branch.
    attention_branch="rel_attn.dropout",
    attention_norm="rel_attn.layer_norm",
    mlp=("ff.layer_1", "ff.layer_2"),
    mlp_norm="ff.layer_norm",
    norm_position="post",
    seq_first=True,
    attention_interface=False,
    notes="relative attention outside AttentionInterface: masks and temperature unsupported",
)

GPT2 = Architecture(
    name="gpt2",
    model_types=("gpt2",),
    layers="h",
    attention="attn",
    q="c_attn",  # one Conv1D makes q, k and v together
    k="c_attn",
    v="c_attn",
    attention_out="attn.c_proj",
    attention_branch="attn",
    attention_norm="ln_1",  # pre-LN: normalises the branch input, the skip bypasses it
    mlp=("mlp",),
    mlp_norm="ln_2",
    norm_position="pre",
    final_norm="ln_f",
    causal=True,
)

LLAMA = Architecture(
    name="llama",
    model_types=("llama",),  # SmolLM2 is a Llama model
    layers="layers",
    attention="self_attn",
    q="q_proj",
    k="k_proj",  # grouped-query attention: fewer key/value heads than query heads
    v="v_proj",
    attention_out="self_attn.o_proj",
    attention_branch="self_attn",
    attention_norm="input_layernorm",  # RMSNorm, pre-LN
    mlp=("mlp",),
    mlp_norm="post_attention_layernorm",  # despite its name, normalises the MLP input
    norm_position="pre",
    final_norm="norm",
    causal=True,
)

ARCHITECTURES: dict[str, Architecture] = {a.name: a for a in (BERT, ALBERT, XLNET, GPT2, LLAMA)}


def architecture_for(model_type: str) -> Architecture:
    """The adapter for a config's `model_type`, or an error naming the supported ones.

    Example:
        >>> architecture_for("roberta").name
        'bert'
    """
    for arch in ARCHITECTURES.values():
        if model_type in arch.model_types:
            return arch
    supported = ", ".join(t for a in ARCHITECTURES.values() for t in a.model_types)
    raise UnknownNameError(
        f"unsupported architecture '{model_type}'. Supported model types: {supported}. "
        "Pass a model of one of these families, or add an Architecture adapter in "
        "rankcollapse/hf/architectures.py."
    )


def submodule(root: nn.Module, path: str) -> nn.Module:
    """The module at a dotted path ("encoder.layer"); "" is the root itself."""
    return root.get_submodule(path) if path else root


def block_list(base_model: nn.Module, arch: Architecture) -> list[nn.Module]:
    """The distinct blocks of a base model (ALBERT: its one shared block)."""
    return list(submodule(base_model, arch.layers))


def n_layers(base_model: nn.Module, arch: Architecture) -> int:
    """Depth as applied in the forward pass (ALBERT: applications of its shared block)."""
    return (
        base_model.config.num_hidden_layers
        if arch.shared_layers
        else len(block_list(base_model, arch))
    )
