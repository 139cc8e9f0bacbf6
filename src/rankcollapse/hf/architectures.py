"""Architecture adapters: where each part of a Hugging Face model lives, one per family.

An adapter declares, it does not compute. Every adapter fills the same canonical parts, as
dotted module paths relative to a block (`layers` and `final_norm` relative to the base model):

- `layers`: the list of transformer blocks.
- `attention`: the module that calls the attention function and owns the projections `q`, `k`,
  `v` (paths relative to `attention`); `attention_out` is the output projection.
- `attention_norm`, `mlp_norm`: the norms of the two sub-layers. Post-LN: the norm after each
  skip add. Pre-LN: the norm at the start of each branch (None when there is none: OLMo 2).
- `attention_branch` (post-LN): the last module of the attention branch before the skip add.
- `mlp`: the MLP's modules in call order; `mlp_branch`: the module whose output is the MLP
  branch alone (pre-LN variants replace it by zeros).
- `residual_in` (pre-LN): the module whose first input is the residual stream of the attention
  sub-layer ("" = the block itself; T5: its `layer.0`); `reads_input`: the modules on the
  attention branch (and, in a parallel block, the MLP branch) that read that input.
- `branch_norms`: norms applied to a branch's output before the skip add (Gemma 2's sandwich
  norms, OLMo 2's reordered norms); `qk_norm`: per-head norms of queries and keys (Qwen 3,
  OLMo 2), inside the attention scores.
- `norm_position`: "post" (a norm after each skip: BERT, ALBERT, XLNet, DistilBERT, DeBERTa-v2,
  OPT-350m) or "pre" (the residual stream bypasses every norm until `final_norm`).

Flags record quirks: `parallel` (GPT-NeoX: x + A(n1(x)) + M(n2(x))), `fused_qkv` ("concat":
q, k, v rows one after the other, as Phi-3's qkv_proj and GPT-2's c_attn; "per_head": GPT-NeoX's
query_key_value, [q_h k_h v_h] per head), `projection` (how a projection stores its weight),
`shared_layers` (ALBERT), `seq_first` (XLNet keeps (n, b, d)), `attention_interface` (False where
relative or disentangled attention bypasses `transformers.AttentionInterface`: masks and
temperature are refused), `probs_at` (for those, the module whose 4-D input is the attention
probabilities), `causal`, `inputs` ("pixels" for ViT), `model_class` (the class that holds the
blocks when the config's own `AutoModel` would not, T5's encoder), `requires` (config values that
select this adapter), `decompose` (the `rankcollapse.paths` recipe that freezes it: where its
MLP's projections and activation are; the block shape comes from the fields above; None if
none), `authors_surgery` (Dong et al.'s code covers this family), `authors_no_mlp` (where their
code dropped the MLP by making its two projections identities: (first projection, activation,
second projection), so the MLP branch became activation(y)).

Example:
    >>> ARCHITECTURES["bert"].norm_position
    'post'
    >>> architecture_for("roberta").name
    'roberta'
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

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
    attention_norm: str | None
    mlp: tuple[str, ...]
    mlp_branch: str
    mlp_norm: str | None
    norm_position: Literal["pre", "post"]
    attention_branch: str = ""
    residual_in: str = ""
    reads_input: tuple[str, ...] = ()
    branch_norms: tuple[str, ...] = ()
    qk_norm: tuple[str, ...] = ()
    parallel: bool = False
    fused_qkv: Literal["concat", "per_head"] | None = None
    projection: Literal["linear", "conv1d", "einsum"] = "linear"
    final_norm: str | None = None
    causal: bool = False
    shared_layers: bool = False
    seq_first: bool = False
    attention_interface: bool = True
    probs_at: str | None = None
    inputs: Literal["tokens", "pixels"] = "tokens"
    model_class: str | None = None
    requires: tuple[tuple[str, Any], ...] = ()
    decompose: (
        Literal[
            "bert",
            "albert",
            "distilbert",
            "xlnet",
            "llama",
            "phi3",
            "gpt2",
            "gpt_neox",
            "opt",
            "t5",
            "vit",
        ]
        | None
    ) = None
    rms_gain_offset: float = 0.0  # Gemma's RMSNorm multiplies by (offset + weight), offset 1
    authors_surgery: bool = False
    authors_no_mlp: tuple[str, str, str] | tuple[()] = ()
    notes: str = ""

    @property
    def decomposable(self) -> bool:
        return self.decompose is not None

    @property
    def block_kind(self) -> str:
        """A short name of the block layout, for tables."""
        if self.parallel:
            return "parallel residual, pre-LN"
        if self.norm_position == "post":
            return "post-LN"
        if self.branch_norms and self.attention_norm:
            return "sandwich norms"
        if self.branch_norms:
            return "norm on branch outputs"
        return "pre-LN"


# ---- Encoders, post-LN: y = Norm_a(x + A(x)), z = Norm_m(y + M(y)) ------------------------

BERT = Architecture(
    name="bert",
    model_types=("bert",),  # MiniLM (all-MiniLM-L6-v2) is a BERT model
    layers="encoder.layer",
    attention="attention.self",
    q="query",
    k="key",
    v="value",
    attention_out="attention.output.dense",
    attention_branch="attention.output.dropout",
    attention_norm="attention.output.LayerNorm",  # post-LN: LayerNorm(branch + skip)
    mlp=("intermediate", "output.dense"),
    mlp_branch="output.dropout",
    mlp_norm="output.LayerNorm",  # post-LN: LayerNorm(mlp + attention sub-layer output)
    norm_position="post",
    decompose="bert",
    authors_surgery=True,  # Dong et al.'s code: the same surgery as the exact variants
)
ROBERTA = replace(BERT, name="roberta", model_types=("roberta",), authors_surgery=False)
XLM_ROBERTA = replace(BERT, name="xlm-roberta", model_types=("xlm-roberta",), authors_surgery=False)
ELECTRA = replace(
    BERT,
    authors_surgery=False,
    name="electra",
    model_types=("electra",),
    notes="layer 0 is the output of embeddings_project when embedding_size != hidden_size",
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
    mlp_branch="ffn_output",
    mlp_norm="full_layer_layer_norm",
    norm_position="post",
    shared_layers=True,
    authors_surgery=True,
    decompose="albert",
    # Dong et al.'s code set ffn and ffn_output to identities: the block still computed
    # full_layer_layer_norm(GELU(y) + y), a GELU and a residual.
    authors_no_mlp=("ffn", "activation", "ffn_output"),
    notes="one shared block; layer 0 is the output of embedding_hidden_mapping_in (E -> hidden)",
)

DISTILBERT = Architecture(
    name="distilbert",
    model_types=("distilbert",),
    layers="transformer.layer",
    attention="attention",
    q="q_lin",
    k="k_lin",
    v="v_lin",
    attention_out="attention.out_lin",
    attention_branch="attention",  # returns (branch, probs)
    attention_norm="sa_layer_norm",
    mlp=("ffn.lin1", "ffn.lin2"),
    mlp_branch="ffn",
    mlp_norm="output_layer_norm",
    norm_position="post",
    decompose="distilbert",
)

XLNET = Architecture(
    name="xlnet",
    model_types=("xlnet",),
    layers="layer",
    attention="rel_attn",
    q="q",  # q, k, v, o are nn.Parameters of rel_attn (einsum weights), not Linear modules
    k="k",
    v="v",
    projection="einsum",
    attention_out="rel_attn.o",
    # rel_attn.dropout is applied twice per block: to the attention probabilities, then to the
    # branch output; its last call before rel_attn.layer_norm is the branch.
    attention_branch="rel_attn.dropout",
    attention_norm="rel_attn.layer_norm",
    mlp=("ff.layer_1", "ff.layer_2"),
    mlp_branch="ff.dropout",
    mlp_norm="ff.layer_norm",
    norm_position="post",
    seq_first=True,
    attention_interface=False,
    probs_at="dropout",
    decompose="xlnet",
    authors_surgery=True,  # their post_attention(residual=False) and ff = Identity: as exact
    notes="relative attention outside AttentionInterface: masks and temperature unsupported",
)

DEBERTA_V2 = Architecture(
    name="deberta-v2",
    model_types=("deberta-v2",),
    layers="encoder.layer",
    attention="attention.self",
    q="query_proj",
    k="key_proj",
    v="value_proj",
    attention_out="attention.output.dense",
    attention_branch="attention.output.dropout",
    attention_norm="attention.output.LayerNorm",
    mlp=("intermediate", "output.dense"),
    mlp_branch="output.dropout",
    mlp_norm="output.LayerNorm",
    norm_position="post",
    attention_interface=False,
    probs_at="dropout",
    decompose="bert",  # the disentangled scores only change P_h; values and MLP are BERT's
    notes="disentangled (relative) attention outside AttentionInterface: masks and temperature "
    "unsupported",
)

# ---- Decoders and pre-LN encoders: y = x + A(Norm_a(x)), z = y + M(Norm_m(y)) -------------

GPT2 = Architecture(
    name="gpt2",
    model_types=("gpt2",),
    layers="h",
    attention="attn",
    q="c_attn",  # one Conv1D makes q, k and v together
    k="c_attn",
    v="c_attn",
    fused_qkv="concat",
    projection="conv1d",
    attention_out="attn.c_proj",
    attention_norm="ln_1",  # pre-LN: normalises the branch input, the skip bypasses it
    reads_input=("ln_1",),
    mlp=("mlp",),
    mlp_branch="mlp",
    mlp_norm="ln_2",
    norm_position="pre",
    final_norm="ln_f",
    causal=True,
    decompose="gpt2",
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
    attention_norm="input_layernorm",  # RMSNorm, pre-LN
    reads_input=("input_layernorm",),
    mlp=("mlp",),
    mlp_branch="mlp",
    mlp_norm="post_attention_layernorm",  # despite its name, normalises the MLP input
    norm_position="pre",
    final_norm="norm",
    causal=True,
    decompose="llama",
)
MISTRAL = replace(LLAMA, name="mistral", model_types=("mistral",))
QWEN2 = replace(LLAMA, name="qwen2", model_types=("qwen2",), notes="biases on q, k, v")
QWEN3 = replace(
    LLAMA,
    name="qwen3",
    model_types=("qwen3",),
    qk_norm=("self_attn.q_norm", "self_attn.k_norm"),
    notes="QK-norm: RMSNorm per head on queries and keys; temperature divides the logits "
    "computed from the normed queries and keys, and the variants keep the QK-norm",
)
GEMMA = replace(
    LLAMA,
    name="gemma",
    model_types=("gemma",),
    rms_gain_offset=1.0,
    notes="embeddings scaled by sqrt(d_model) before layer 0; RMSNorm multiplies by (1 + weight)",
)
GEMMA2 = replace(
    GEMMA,
    name="gemma2",
    model_types=("gemma2",),
    mlp_norm="pre_feedforward_layernorm",
    mlp_branch="post_feedforward_layernorm",  # the branch ends with its own norm
    # Sandwich norms: post_attention_layernorm normalises the attention output before the add.
    branch_norms=("post_attention_layernorm", "post_feedforward_layernorm"),
    notes="sandwich norms; logits soft-capped (attn_logit_softcapping) and scaled by "
    "query_pre_attn_scalar; temperature divides the soft-capped logits; alternate layers "
    "use a sliding window unless --mask replaces it",
)
OLMO2 = replace(
    LLAMA,
    name="olmo2",
    model_types=("olmo2",),
    attention_norm=None,  # no norm before a branch: y = x + Norm(A(x)), z = y + Norm(M(y))
    reads_input=("self_attn",),
    mlp_norm=None,
    mlp_branch="post_feedforward_layernorm",
    branch_norms=("post_attention_layernorm", "post_feedforward_layernorm"),
    qk_norm=("self_attn.q_norm", "self_attn.k_norm"),
    notes="norms on branch outputs only, and QK-norm over all heads; temperature divides the "
    "logits of the normed queries and keys",
)
PHI3 = replace(
    LLAMA,
    name="phi3",
    model_types=("phi3",),
    q="qkv_proj",  # fused: q rows, then k rows, then v rows
    k="qkv_proj",
    v="qkv_proj",
    fused_qkv="concat",
    mlp=("mlp.gate_up_proj", "mlp.down_proj"),
    decompose="phi3",
    notes="fused qkv_proj and gate_up_proj",
)
GPT_NEOX = Architecture(
    name="gpt_neox",
    model_types=("gpt_neox",),
    layers="layers",
    attention="attention",
    q="query_key_value",
    k="query_key_value",
    v="query_key_value",
    fused_qkv="per_head",
    attention_out="attention.dense",
    attention_norm="input_layernorm",
    # Parallel residual: both branches read the block input x.
    reads_input=("input_layernorm", "post_attention_layernorm"),
    mlp=("mlp",),
    mlp_branch="mlp",
    mlp_norm="post_attention_layernorm",  # the MLP's input norm
    norm_position="pre",
    parallel=True,
    final_norm="final_layer_norm",
    causal=True,
    requires=(("use_parallel_residual", True),),
    decompose="gpt_neox",
    notes="use_parallel_residual: x + A(LN1(x)) + M(LN2(x)); the attention skip is the + x",
)
GPT_NEOX_SEQUENTIAL = replace(
    GPT_NEOX,
    name="gpt_neox-sequential",
    reads_input=("input_layernorm",),
    parallel=False,
    requires=(("use_parallel_residual", False),),
    notes="use_parallel_residual=False: a sequential pre-LN block",
)
OPT = Architecture(
    name="opt",
    model_types=("opt",),
    layers="decoder.layers",
    attention="self_attn",
    q="q_proj",
    k="k_proj",
    v="v_proj",
    attention_out="self_attn.out_proj",
    attention_norm="self_attn_layer_norm",
    reads_input=("self_attn_layer_norm",),
    mlp=("fc1", "fc2"),  # the MLP is two Linears on the block itself, not a module
    mlp_branch="fc2",
    mlp_norm="final_layer_norm",  # despite its name, the MLP's input norm (pre-LN)
    norm_position="pre",
    final_norm="decoder.final_layer_norm",
    causal=True,
    requires=(("do_layer_norm_before", True),),
    decompose="opt",
)
OPT_POST = replace(
    OPT,
    name="opt-post",
    attention_branch="self_attn",  # returns (branch, probs); the dropout is a function
    norm_position="post",
    reads_input=(),
    final_norm=None,
    requires=(("do_layer_norm_before", False),),
    notes="do_layer_norm_before=False (OPT-350m): post-LN",
)
T5_ENCODER = Architecture(
    name="t5",
    model_types=("t5",),
    layers="encoder.block",
    attention="layer.0.SelfAttention",
    q="q",
    k="k",
    v="v",
    attention_out="layer.0.SelfAttention.o",
    attention_norm="layer.0.layer_norm",  # RMSNorm without mean, pre-LN
    residual_in="layer.0",  # the skip add happens inside the sub-layer module
    reads_input=("layer.0.layer_norm",),
    mlp=("layer.1.DenseReluDense",),
    mlp_branch="layer.1.DenseReluDense",
    mlp_norm="layer.1.layer_norm",
    norm_position="pre",
    final_norm="encoder.final_layer_norm",
    model_class="T5EncoderModel",
    decompose="t5",
    notes="encoder stack only (T5EncoderModel); scores not scaled by 1/sqrt(d_kv); a learned "
    "relative position bias is added to the scores (kept under --mask; temperature divides "
    "the logits including the bias)",
)
VIT = Architecture(
    name="vit",
    model_types=("vit",),
    layers="layers",
    attention="attention",
    q="q_proj",
    k="k_proj",
    v="v_proj",
    attention_out="attention.o_proj",
    attention_norm="layernorm_before",
    reads_input=("layernorm_before",),
    mlp=("mlp.fc1", "mlp.fc2"),
    mlp_branch="mlp",
    mlp_norm="layernorm_after",
    norm_position="pre",
    final_norm="layernorm",
    inputs="pixels",
    decompose="vit",
    notes="tokens are the [CLS] token and image patches; probed on random pixels or a "
    "folder of images (--images DIR)",
)

ARCHITECTURES: dict[str, Architecture] = {
    a.name: a
    for a in (
        LLAMA,
        MISTRAL,
        QWEN2,
        QWEN3,
        GEMMA,
        GEMMA2,
        PHI3,
        OLMO2,
        GPT2,
        GPT_NEOX,
        GPT_NEOX_SEQUENTIAL,
        OPT,
        OPT_POST,
        BERT,
        ROBERTA,
        XLM_ROBERTA,
        ELECTRA,
        DISTILBERT,
        ALBERT,
        XLNET,
        DEBERTA_V2,
        T5_ENCODER,
        VIT,
    )
}


def supported_model_types() -> list[str]:
    """Every config `model_type` an adapter exists for."""
    return list(dict.fromkeys(t for a in ARCHITECTURES.values() for t in a.model_types))


def _matches(arch: Architecture, config: Any) -> bool:
    return all(getattr(config, key, value) == value for key, value in arch.requires)


def architecture_for(model_type: str, config: Any = None) -> Architecture:
    """The adapter for a config's `model_type` (and its layout flags), or an error naming the
    supported ones.

    Example:
        >>> architecture_for("qwen2").decompose
        'llama'
    """
    candidates = [a for a in ARCHITECTURES.values() if model_type in a.model_types]
    for arch in candidates:
        if config is None or _matches(arch, config):
            return arch
    raise UnknownNameError(
        f"unsupported architecture '{model_type}'. Supported model types: "
        f"{', '.join(supported_model_types())}; a decoder whose blocks have Llama's layout "
        "(self_attn.{q,k,v,o}_proj, mlp, input_layernorm, post_attention_layernorm) is "
        "recognised by its structure. Pass a model of one of these families, or add an "
        "Architecture adapter in rankcollapse/hf/architectures.py."
    )


def declared(config: Any) -> bool:
    """Whether an adapter of `ARCHITECTURES` declares `config.model_type`."""
    return any(config.model_type in a.model_types for a in ARCHITECTURES.values())


def model_class_of(config: Any) -> Any:
    """The transformers class that holds the blocks: AutoModel, or the adapter's own (T5's
    encoder)."""
    import transformers

    arch = architecture_for(config.model_type, config) if declared(config) else None
    if arch is not None and arch.model_class:
        return getattr(transformers, arch.model_class)
    return transformers.AutoModel


def infer_architecture(model: nn.Module) -> Architecture | None:
    """Llama's adapter when a model's blocks have Llama's layout, whatever its `model_type`.

    Example:
        >>> from transformers import LlamaConfig, LlamaModel
        >>> cfg = LlamaConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
        ...                   intermediate_size=8, vocab_size=10)
        >>> infer_architecture(LlamaModel(cfg)).name
        'llama'
    """
    try:
        blocks = block_list(model, LLAMA)
    except AttributeError:
        return None
    parts = [f"self_attn.{p}" for p in ("q_proj", "k_proj", "v_proj", "o_proj")]
    parts += ["mlp", "input_layernorm", "post_attention_layernorm"]
    for block in blocks:
        names = {name for name, _ in block.named_modules()}
        if not all(p in names for p in parts):
            return None
    return LLAMA if blocks else None


def submodule(root: nn.Module, path: str) -> nn.Module:
    """The module at a dotted path ("encoder.layer"); "" is the root itself."""
    return root.get_submodule(path) if path else root


def block_list(base_model: nn.Module, arch: Architecture) -> list[nn.Module]:
    """The distinct blocks of a base model (ALBERT: its one shared block)."""
    return list(submodule(base_model, arch.layers).children())


def n_layers(base_model: nn.Module, arch: Architecture) -> int:
    """Depth as applied in the forward pass (ALBERT: applications of its shared block)."""
    config: Any = base_model.config  # a transformers config (torch types it as a Module)
    return config.num_hidden_layers if arch.shared_layers else len(block_list(base_model, arch))


def head_sizes(config: Any) -> tuple[int, int, int]:
    """(n_heads, n_kv_heads, d_head) of a config (d_head: head_dim, T5's d_kv, or d_model / H).

    Example:
        >>> from transformers import LlamaConfig
        >>> head_sizes(LlamaConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=2))
        (4, 2, 16)
    """
    n_heads = config.num_attention_heads
    n_kv = getattr(config, "num_key_value_heads", None) or n_heads
    d_head = getattr(config, "head_dim", None) or getattr(config, "d_kv", None)
    return n_heads, n_kv, d_head or config.hidden_size // n_heads
