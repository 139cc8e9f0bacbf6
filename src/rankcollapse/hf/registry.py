"""The model registry: every config the package builds, in two tables of data.

- `FAMILIES`: per family of `ARCHITECTURES`, its transformers config class and its tiny
  config (2 layers, width 32, 4 heads; 2 key-value heads where the family has grouped-query
  attention; special token ids inside a 64-id vocabulary). `tiny_config(family)` builds it;
  every family has one (a test checks), so a new adapter gets the conformance tests for free.
- `MODELS`: the names a user can type, one `ModelSpec` each (family, sizes, causal or not,
  decomposable or not, default init). A random-init preset carries the arguments its family's
  config class needs for the real model's sizes (`ModelSpec.config(vocab_size)`); a pretrained
  name's config ships with its weights.

The loader (`rankcollapse.hf.models`) reads both; nothing here loads weights.

Example:
    >>> tiny_config("qwen3").num_hidden_layers, MODELS["bert-large"].config(30522).hidden_size
    (2, 1024)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from rankcollapse.errors import ConfigError, unknown_name
from rankcollapse.files import is_directory
from rankcollapse.hf.architectures import ARCHITECTURES, Architecture
from rankcollapse.hf.folders import check_model_folder

Init = Literal["pretrained", "random"]
VOCAB = 64  # the tiny configs' vocabulary
_COMMON = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 64,
    "vocab_size": VOCAB,
}
# Decoders: grouped-query attention and token ids inside the small vocabulary (Phi-3's and
# GPT-2's defaults point outside it).
_DECODER = {
    **_COMMON,
    "num_key_value_heads": 2,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
    "max_position_embeddings": 128,
}
_OPT = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "ffn_dim": 64,
    "vocab_size": VOCAB,
    "word_embed_proj_dim": 32,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
    "max_position_embeddings": 128,
}
_NEOX = {**_COMMON, "bos_token_id": 1, "eos_token_id": 2, "max_position_embeddings": 128}


@dataclass(frozen=True)
class Family:
    """A family's transformers config class and the arguments of its tiny config."""

    config_class: str  # a name in `transformers`
    tiny: Mapping[str, Any]

    def config(self, args: Mapping[str, Any]) -> Any:
        """The config class built with `args` (its defaults for the rest)."""
        import transformers

        return getattr(transformers, self.config_class)(**args)


FAMILIES: dict[str, Family] = {
    "llama": Family("LlamaConfig", _DECODER),
    "mistral": Family("MistralConfig", _DECODER),
    "qwen2": Family("Qwen2Config", _DECODER),
    "qwen3": Family("Qwen3Config", {**_DECODER, "head_dim": 8}),
    "gemma": Family("GemmaConfig", {**_DECODER, "head_dim": 8}),
    "gemma2": Family(
        "Gemma2Config",
        {**_DECODER, "head_dim": 8, "query_pre_attn_scalar": 8, "sliding_window": 4},
    ),
    "phi3": Family("Phi3Config", _DECODER),
    "olmo2": Family("Olmo2Config", _DECODER),
    "gpt2": Family(
        "GPT2Config",
        {
            "n_embd": 32,
            "n_layer": 2,
            "n_head": 4,
            "vocab_size": VOCAB,
            "n_positions": 128,
            "bos_token_id": 1,
            "eos_token_id": 2,
        },
    ),
    "gpt_neox": Family("GPTNeoXConfig", _NEOX),
    "gpt_neox-sequential": Family("GPTNeoXConfig", {**_NEOX, "use_parallel_residual": False}),
    "opt": Family("OPTConfig", _OPT),
    "opt-post": Family("OPTConfig", {**_OPT, "do_layer_norm_before": False}),
    "bert": Family("BertConfig", _COMMON),
    "roberta": Family("RobertaConfig", {**_COMMON, "pad_token_id": 1}),
    "xlm-roberta": Family("XLMRobertaConfig", {**_COMMON, "pad_token_id": 1}),
    "electra": Family("ElectraConfig", {**_COMMON, "embedding_size": 16}),
    "distilbert": Family(
        "DistilBertConfig",
        {"dim": 32, "n_layers": 2, "n_heads": 4, "hidden_dim": 64, "vocab_size": VOCAB},
    ),
    "albert": Family("AlbertConfig", {**_COMMON, "embedding_size": 16}),
    "xlnet": Family(
        "XLNetConfig",
        {"d_model": 32, "n_layer": 2, "n_head": 4, "d_inner": 64, "vocab_size": VOCAB},
    ),
    # DeBERTa-v3's attention: disentangled, content-to-position and position-to-content.
    "deberta-v2": Family(
        "DebertaV2Config",
        {
            **_COMMON,
            "relative_attention": True,
            "pos_att_type": ["p2c", "c2p"],
            "position_biased_input": False,
            "max_relative_positions": 16,
        },
    ),
    "t5": Family(
        "T5Config",
        {
            "d_model": 32,
            "d_kv": 8,
            "d_ff": 64,
            "num_layers": 2,
            "num_heads": 4,
            "vocab_size": VOCAB,
        },
    ),
    "vit": Family(
        "ViTConfig",
        {
            "hidden_size": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "intermediate_size": 64,
            "image_size": 16,
            "patch_size": 4,
        },
    ),
}


def tiny_config(family: str) -> Any:
    """A 2-layer, 32-wide config of `family` (a name of `ARCHITECTURES`)."""
    if family not in FAMILIES:
        raise unknown_name("family", family, ARCHITECTURES)
    return FAMILIES[family].config(FAMILIES[family].tiny)


@dataclass(frozen=True)
class ModelSpec:
    """A name a user can type: its family, sizes, and where its config and weights come from."""

    name: str
    description: str
    family: str  # a name of ARCHITECTURES (and FAMILIES)
    n_layers: int
    n_heads: int
    d_model: int
    pretrained: bool  # True: weights ship offline; False: random-init preset only
    preset: Mapping[str, Any] | None = None  # a preset's config arguments beside vocab_size
    init_on_device: bool = False  # too big for a CPU copy: initialised on its device

    @property
    def arch(self) -> Architecture:
        return ARCHITECTURES[self.family]

    @property
    def causal(self) -> bool:
        return self.arch.causal

    @property
    def default_init(self) -> Init:
        """pretrained where weights ship offline, else random (a preset's only init)."""
        return "pretrained" if self.pretrained else "random"

    @property
    def decomposable(self) -> bool:
        return self.arch.decomposable

    def config(self, vocab_size: int) -> Any:
        """A random-init preset's transformers config (its own `vocab_size` where it names
        one; an image model takes none)."""
        if self.preset is None:
            raise ConfigError(f"model '{self.name}' ships its config with its weights.")
        text = {} if self.arch.inputs == "pixels" else {"vocab_size": vocab_size}
        return FAMILIES[self.family].config({**text, **self.preset})


def _spec(name, description, family, n_layers, n_heads, d_model, preset=None, **options):
    """A row of MODELS: a pretrained name without `preset`, a random-init preset with it."""
    return ModelSpec(name, description, family, n_layers, n_heads, d_model, preset is None,
                     preset, **options)  # fmt: skip


MODELS: dict[str, ModelSpec] = {
    s.name: s
    for s in (
        _spec("minilm", "all-MiniLM-L6-v2: pretrained BERT encoder, post-LN", "bert", 6, 12, 384),
        _spec("smollm2", "SmolLM2-135M-Instruct: pretrained Llama decoder, pre-RMSNorm, 4-bit GGUF",
              "llama", 30, 9, 576),
        # BertConfig's defaults are BERT-base.
        _spec("bert-base", "BERT-base at init, post-LN", "bert", 12, 12, 768, {}),
        _spec("bert-large", "BERT-large at init, post-LN", "bert", 24, 16, 1024,
              {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
               "intermediate_size": 4096}),
        # DistilBertConfig's defaults are DistilBERT-base.
        _spec("distilbert", "DistilBERT-base at init, post-LN", "distilbert", 6, 12, 768, {}),
        # AlbertConfig's defaults are ALBERT-xxlarge: the base sizes set explicitly.
        _spec("albert-base", "ALBERT-base at init, one shared block", "albert", 12, 12, 768,
              {"embedding_size": 128, "hidden_size": 768, "num_hidden_layers": 12,
               "num_attention_heads": 12, "intermediate_size": 3072}),
        # XLNetConfig's defaults are XLNet-large.
        _spec("xlnet-base", "XLNet-base at init, relative attention", "xlnet", 12, 12, 768,
              {"d_model": 768, "n_layer": 12, "n_head": 12, "d_inner": 3072}),
        # GPT2Config's defaults are GPT-2 small; its bos/eos ids (50256) are not in the
        # borrowed vocabulary.
        _spec("gpt2", "GPT-2 small at init, pre-LN", "gpt2", 12, 12, 768,
              {"bos_token_id": None, "eos_token_id": None}),
        # LlamaConfig's defaults are a 7B model; this is SmolLM2-135M's shape.
        _spec("llama-small", "Llama at init, SmolLM2-135M's shape", "llama", 30, 9, 576,
              {"hidden_size": 576, "num_hidden_layers": 30, "num_attention_heads": 9,
               "num_key_value_heads": 3, "head_dim": 64, "intermediate_size": 1536,
               "max_position_embeddings": 2048, "tie_word_embeddings": True}),
        # Qwen2-0.5B's shape (its own vocabulary of 151936 is replaced by the borrowed one).
        _spec("qwen2-0.5b", "Qwen2 at init, Qwen2-0.5B's shape (2 key-value heads)", "qwen2",
              24, 14, 896,
              {"hidden_size": 896, "num_hidden_layers": 24, "num_attention_heads": 14,
               "num_key_value_heads": 2, "intermediate_size": 4864,
               "max_position_embeddings": 32768, "tie_word_embeddings": True,
               "bos_token_id": None, "eos_token_id": None}),
        # Llama-3-8B's shape, with its own vocabulary of 128256 (the borrowed tokenizer's ids
        # and random tokens stay below 30522).
        _spec("llama3-8b",
              "Llama at init, Llama-3-8B's shape (8 key-value heads), initialised on its device",
              "llama", 32, 32, 4096,
              {"vocab_size": 128256, "hidden_size": 4096, "intermediate_size": 14336,
               "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
               "max_position_embeddings": 8192, "rope_theta": 500000.0, "rms_norm_eps": 1e-5},
              init_on_device=True),
        _spec("pythia-160m", "GPT-NeoX at init, Pythia-160M's shape, parallel residual",
              "gpt_neox", 12, 12, 768,
              {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
               "intermediate_size": 3072, "rotary_pct": 0.25, "max_position_embeddings": 2048,
               "bos_token_id": None, "eos_token_id": None}),
        _spec("t5-small", "T5-small's encoder at init, relative position bias", "t5", 6, 8, 512,
              {"d_model": 512, "d_kv": 64, "d_ff": 2048, "num_layers": 6, "num_heads": 8}),
        # ViTConfig's defaults are ViT-Base/16 at 224 x 224: 197 tokens.
        _spec("vit-base", "ViT-Base/16 at init, 224 x 224 pixels (197 tokens)", "vit", 12, 12,
              768, {}),
    )
}  # fmt: skip


def check_model_name(name: str, init: str) -> None:
    """`name` is a model of `MODELS` with weights for `init`, or a model folder that passes
    `check_model_folder`; else one clear error."""
    if init not in ("pretrained", "random"):
        raise ConfigError(f"init must be 'pretrained' or 'random', got {init!r}.")
    if name in MODELS:
        spec = MODELS[name]
        if init == "pretrained" and not spec.pretrained:
            with_weights = ", ".join(n for n, s in MODELS.items() if s.pretrained)
            raise ConfigError(
                f"model '{name}' is a random-init preset with no pretrained weights offline. "
                f"Use init='random' (--init random), or a pretrained model: {with_weights}, "
                "or a local model directory."
            )
        return
    if not is_directory(name):
        raise unknown_name("model", name, MODELS, extra="or a local model directory")
    check_model_folder(name)


def model_entry(entry: str, *, decomposable: bool = False) -> tuple[str, str]:
    """(name, init) of a model written "name" or "name:init" (init: pretrained, the default, or
    random); with `decomposable`, the name must be a model of `MODELS` whose family decomposes
    into paths, or a local model directory.

    Example:
        >>> model_entry("minilm:random"), model_entry("minilm")
        (('minilm', 'random'), ('minilm', 'pretrained'))
    """
    name, _, init = entry.partition(":")
    if init not in ("", "pretrained", "random"):
        raise ConfigError(f"'{entry}': the init after ':' must be pretrained or random")
    allowed = [n for n, spec in MODELS.items() if spec.decomposable]
    if decomposable and name not in allowed and not is_directory(name):
        raise ConfigError(
            f"'{name}' cannot be decomposed; use one of {', '.join(allowed)} "
            "or a local model directory of a decomposable family"
        )
    if name not in MODELS and is_directory(name):
        check_model_folder(name)
    return name, init or "pretrained"


def text_models() -> list[str]:
    """The names of `MODELS` that read token ids (every family but the image ones), in order."""
    return [name for name, spec in MODELS.items() if spec.arch.inputs == "tokens"]


def text_model_type(*extra: str) -> Any:
    """A pydantic field type for a model an experiment runs on text: a name of `text_models()`
    (read from the registry, so a new family needs no experiment edit) or one of `extra` (the
    experiment's own arms, e.g. "toy"), checked once, kept and dumped as the name.

    Example:
        >>> from pydantic import TypeAdapter
        >>> TypeAdapter(text_model_type("toy")).validate_python("gpt2")
        'gpt2'
    """
    from typing import Annotated

    from pydantic import PlainValidator, WithJsonSchema

    known = [*extra, *text_models()]

    def check(name: Any) -> str:
        if not isinstance(name, str) or name not in known:
            raise unknown_name("model", str(name), known)
        return name

    schema = {"type": "string", "enum": known}
    return Annotated[str, PlainValidator(check), WithJsonSchema(schema)]


__all__ = [
    "FAMILIES",
    "MODELS",
    "VOCAB",
    "Family",
    "Init",
    "ModelSpec",
    "check_model_name",
    "model_entry",
    "text_model_type",
    "text_models",
    "tiny_config",
]
