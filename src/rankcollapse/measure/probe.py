"""Probe a real model: per-layer metrics of its residual stream, for several variants, as a
tidy DataFrame. The Python twin of `rankcollapse probe`.

A probe is three small typed parts, each built once where the values enter (the command line,
a config, a Python call), then composed by `run_probe`:

- `ModelSource`: which model and how it loads (name, directory or model in memory; init,
  seed, device, dtype, depth of a random init) -> `LoadedModel`;
- `ProbeInputs`: what goes in (text windows, padded paragraphs, random token ids, images;
  sizes and seed) -> token ids and the token mask;
- `ProbeRequest`: what is measured (variants, attention mask, temperature, mode, metrics
  split by kind), from names by `resolve_probe`.

`probe(model, **options)` builds the three from plain values and runs them. Metrics stream:
each layer's states are copied as soon as the block has run, measured a few layers at a time
(float64, with the dtype-floor flag of the model's dtype; `measure.layers.LayerMeasure`) and
dropped unless `keep_states=True`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn

from rankcollapse.devices import parse_device, resolve_device, resolve_dtype
from rankcollapse.errors import ConfigError, InputError, option
from rankcollapse.hf import (
    Init,
    LoadedModel,
    load_paragraphs,
    load_resolved,
    load_windows,
    pixel_inputs,
    random_token_ids,
)
from rankcollapse.masks import MaskSpec, as_mask_spec
from rankcollapse.measure.kinds import (
    Measured,
    embedding_size,
    in_memory,
    is_in_memory,
    takes_pixels,
)
from rankcollapse.measure.layers import Progress, check_model, measure_batch, prepare_batch
from rankcollapse.metrics import DEFAULT_METRICS, get_metric
from rankcollapse.sizes import check_memory, check_size
from rankcollapse.variants import Variant, parse_variant

CPU = torch.device("cpu")

ID_COLUMNS = ["model", "init", "variant", "mask", "temperature", "mode", "layer", "layer_kind"]


@dataclass(frozen=True)
class ModelSource:
    """Which model a probe measures and how it loads: a name of `MODELS`, a local model
    directory, a `LoadedModel`, or a Hugging Face model in memory (then `tokenizer` is its
    tokenizer and the loading options are ignored). Hashable when `model` is a name, so a
    loader can cache by it."""

    model: str | Path | LoadedModel | nn.Module
    init: Init = "pretrained"
    seed: int = 0
    device: torch.device = CPU
    """Resolved by the caller (`resolve_device`: the command line, `probe`; an experiment's
    config): `load` does not check it again."""
    dtype: torch.dtype = torch.float32
    n_layers: int | None = None
    """Depth of a random init (None: the model's own)."""
    tokenizer: Any = None
    """A tokenizer directory replacing a named model's own, or the tokenizer of a model in
    memory."""

    def load(self) -> Measured:
        if is_in_memory(self.model):
            return in_memory(self.model, tokenizer=self.tokenizer)
        return load_resolved(
            self.model,
            init=self.init,
            seed=self.seed,
            device=self.device,
            dtype=self.dtype,
            n_layers=self.n_layers,
            tokenizer=self.tokenizer if isinstance(self.tokenizer, (str, Path)) else None,
        )


@dataclass(frozen=True)
class ProbeInputs:
    """What a probe feeds the model: text windows of exactly `n_tokens` real tokens (from
    `text`: None = the sample corpus, a Path to a file, or the text itself), one padded
    paragraph per sample (`padded`), random token ids (`random_tokens`), or images (`images`:
    a folder, for vision models; random pixels without one). `seed` picks windows and
    random tokens."""

    text: str | Path | None = None
    random_tokens: bool = False
    padded: bool = False
    images: str | Path | None = None
    n_samples: int = 32
    n_tokens: int = 128
    seed: int = 0

    def __post_init__(self) -> None:
        """Each size within its bound (`rankcollapse.sizes`) and the token ids within this
        machine's memory, checked before anything is allocated; else a ConfigError naming the
        size, its bound and the memory it would need."""
        ids = {"n_samples": self.n_samples, "n_tokens": self.n_tokens}
        sized = all(type(v) is int and v > 0 for v in ids.values())
        needed = 8 * self.n_samples * self.n_tokens if sized else None  # int64 token ids
        for name, value in ids.items():
            check_size(name, value, needs=needed)
        check_memory("probe inputs", needed, ids, "lower n_samples or n_tokens")

    def build(self, loaded: Measured) -> tuple[Tensor, Tensor]:
        """(input ids or pixels, boolean token mask (b, n)) for this model: text windows,
        padded paragraphs, random token ids (from the tokenizer, or the config's vocabulary
        when there is none), random pixels, or up to `n_samples` images of a folder."""
        size = None if takes_pixels(loaded) else embedding_size(loaded)
        if takes_pixels(loaded):
            return pixel_inputs(
                loaded,
                text=self.text,
                padded=self.padded,
                images=self.images,
                n_samples=self.n_samples,
                seed=self.seed,
            )
        if self.images is not None:
            raise InputError(
                f"model '{loaded.name}' takes text, not images; drop "
                f"{option('images', 'DIR')}, or pass a vision model (vit)."
            )
        if self.random_tokens:
            vocabulary = loaded.vocabulary  # no tokenizer is loaded for random ids
            return random_token_ids(
                vocabulary.size,
                vocabulary.special,
                n_samples=self.n_samples,
                n_tokens=self.n_tokens,
                seed=self.seed,
            )
        if not loaded.has_tokenizer:
            raise _no_tokenizer(loaded)
        if self.padded:
            ids, mask = load_paragraphs(
                loaded.tokenizer, text=self.text, n_samples=self.n_samples, max_tokens=self.n_tokens
            )
        else:
            ids, mask = load_windows(
                loaded.tokenizer,
                text=self.text,
                n_samples=self.n_samples,
                n_tokens=self.n_tokens,
                seed=self.seed,
            )
        if int(ids.max()) >= size:
            raise InputError(
                f"the tokenizer of '{loaded.name}' gives ids up to {int(ids.max())} but the "
                f"model's embedding has {size}; pass the model's own tokenizer "
                f"({option('tokenizer', 'DIR')}) or {option('random_tokens')}."
            )
        return ids, mask


def _no_tokenizer(loaded: Measured) -> InputError:
    """Text asked of a model without a tokenizer: the fix in the caller's words."""
    vocabulary = f"random ids from the config's vocabulary of {embedding_size(loaded)}"
    if loaded.init == "in-memory":
        return InputError(
            f"model '{loaded.name}' is in memory without a tokenizer, so text cannot be "
            f"tokenized. Pass {option('random_tokens')} ({vocabulary}) or its tokenizer "
            f"({option('tokenizer', 'tokenizer')})."
        )
    return InputError(
        f"model '{loaded.name}' has no tokenizer (its directory holds no tokenizer files), so "
        f"text cannot be tokenized. Pass {option('random_tokens')} ({vocabulary}) or a "
        f"tokenizer directory ({option('tokenizer', 'DIR')})."
    )


@dataclass(frozen=True)
class ProbeRequest:
    """What a probe measures, resolved once from names (`resolve_probe`), before any model
    loads."""

    variants: tuple[Variant, ...]
    mask: MaskSpec | Tensor | None
    """A parsed mask spec, a boolean (n, n) tensor, or None: the model's own pattern."""
    state_metrics: tuple[str, ...]
    """Metric names of `rankcollapse.metrics.METRICS` measured on the states."""
    attention_metrics: tuple[str, ...] = ()
    """Metric names measured on the attention probabilities (averaged over heads)."""
    temperature: float = 1.0
    """Softmax temperature (logits / T) on top of the model's own scaling."""
    train_mode: bool = False
    """Dropout on."""
    batch_size: int | None = None
    """Samples per forward pass (None: as many as hold `measure.layers.MAX_TOKENS` tokens, on
    an accelerator `DEVICE_MAX_TOKENS`; all at once in train mode)."""
    keep_states: bool = False
    """Also keep every layer's states in `frame.attrs["states"]`."""

    @property
    def metrics(self) -> tuple[str, ...]:
        """Every metric name: the states metrics, then the attention ones."""
        return (*self.state_metrics, *self.attention_metrics)

    def check_fits(self, inputs: ProbeInputs) -> None:
        """A mask spec whose parameters do not fit the token count fails here, before loading."""
        if isinstance(self.mask, MaskSpec) and not inputs.padded:
            self.mask.build(inputs.n_tokens)


def _names(what: str, names: Any) -> list[Any] | None:
    """A list of names from "a,b" or a list (None stays None), each named once."""
    if names is None:
        return None
    if isinstance(names, str):
        names = [name.strip() for name in names.split(",") if name.strip()]
    try:
        names = list(names)
    except TypeError:
        raise ConfigError(
            f"{what} takes names, as a list or 'a,b', got {names!r}; see `rankcollapse {what}`."
        ) from None
    if not all(isinstance(name, str) for name in names):
        odd = next(name for name in names if not isinstance(name, str))
        raise ConfigError(
            f"{what} takes names (str), got {odd!r} in {names!r}; see `rankcollapse {what}`."
        )
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ConfigError(f"{what} names {twice} more than once; name each once.")
    return names


def resolve_probe(
    variants: str | Sequence[str | Variant] = ("transformer",),
    mask: str | MaskSpec | Tensor | None = None,
    metrics: str | Sequence[str] | None = None,
    *,
    temperature: float = 1.0,
    train_mode: bool = False,
    batch_size: int | None = None,
    keep_states: bool = False,
) -> ProbeRequest:
    """Resolve a probe's names once: variants ("san,transformer", a list of names or `Variant`
    objects), a mask spec ("window:1"; None or "model": the model's own pattern) and metric
    names (a list or "a,b"; None: `DEFAULT_METRICS`). A bad name raises a clear error
    ("did you mean").

    Example:
        >>> request = resolve_probe("san, transformer", "window:1", ["res_comp_rel"])
        >>> [v.name for v in request.variants], str(request.mask), request.metrics
        (['san', 'transformer'], 'window:1', ('res_comp_rel',))
    """
    variants, metrics = _names("variants", variants), _names("metrics", metrics)
    resolved = tuple(parse_variant(v) for v in variants)
    names = list(DEFAULT_METRICS) if metrics is None else metrics
    kinds = {name: get_metric(name).kind for name in names}
    state_metrics = tuple(n for n in names if kinds[n] == "states")
    attention_metrics = tuple(n for n in names if kinds[n] == "attention")
    if not resolved or not (state_metrics or attention_metrics):
        raise ConfigError(
            f"at least one variant and one metric are needed, got variants={list(variants)}, "
            f"metrics={metrics}; see `rankcollapse variants` and `rankcollapse metrics`."
        )
    if batch_size is not None:
        check_size("batch_size", batch_size)
    if isinstance(mask, str):
        mask = None if mask == "model" else as_mask_spec(mask)
    return ProbeRequest(
        resolved,
        mask,
        state_metrics,
        attention_metrics,
        temperature=temperature,
        train_mode=train_mode,
        batch_size=batch_size,
        keep_states=keep_states,
    )


def probe(
    model: str | LoadedModel | nn.Module,
    *,
    tokenizer: Any = None,
    init: Init = "pretrained",
    variants: str | Sequence[str | Variant] = ("transformer",),
    mask: str | MaskSpec | Tensor | None = None,
    temperature: float = 1.0,
    train_mode: bool = False,
    text: str | Path | None = None,
    random_tokens: bool = False,
    padded: bool = False,
    images: str | Path | None = None,
    n_samples: int = 32,
    n_tokens: int = 128,
    metrics: Sequence[str] | None = None,
    seed: int = 0,
    batch_size: int | None = None,
    keep_states: bool = False,
    device: str | torch.device = "cpu",
    dtype: str | torch.dtype = "float32",
) -> pd.DataFrame:
    """Per-layer metrics of a real model's residual stream, one row per (variant, layer,
    sample, metric).

    Args:
        model: a name of `MODELS`, a local model directory, a `LoadedModel`, or a Hugging Face
            model in memory (base model or one with a head; used as it is, not copied, and
            left as it was: hooks and attention implementation restored, also after an error).
        tokenizer: the tokenizer of a model in memory (None: random tokens only).
        init: "pretrained" or "random" (ignored when `model` is already loaded).
        variants: names of `VARIANTS` ("san", "san+mlp", "san+skip", "transformer", "wu:..."),
            as a list or "a,b", or resolved `Variant`s (see `resolve_probe`).
        mask: None (the model's own pattern), a spec of `rankcollapse.masks.mask_from_spec`
            ("causal", "window:1", ...) or its `MaskSpec`, or a boolean (n, n) tensor.
        temperature: softmax temperature (logits / T).
        train_mode: dropout on.
        text: None (the sample corpus), a Path to a text file, or the text as a str.
        random_tokens: random token ids instead of text.
        padded: one paragraph per sample, truncated to `n_tokens`, right-padded; pads never
            enter attention (as keys) nor metrics.
        images: a folder of PNG or JPEG files for a vision model (ViT; up to `n_samples` in
            file-name order, see `load_images`). None: random pixels.
        n_samples, n_tokens: windows of exactly `n_tokens` real tokens.
        metrics: names of `rankcollapse.metrics.METRICS` (default `DEFAULT_METRICS`); attention
            metrics are averaged over heads per sample.
        seed: seed of the random init, the window choice and random tokens.
        batch_size: samples per forward pass (default: about 2048 tokens per pass, all at
            once in train mode); rows and values do not depend on it.
        keep_states: also keep every layer's states: `frame.attrs["states"][variant]` is a list
            of (n_samples, n, d) float tensors, index = layer.
        device, dtype: where and in which parameter dtype a model given by name runs ("auto",
            "cpu", "cuda", "mps"; "float32", "bfloat16", "float16"); metrics are float64.

    Example:
        >>> from transformers import BertConfig, BertModel
        >>> cfg = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        ...                  intermediate_size=64, vocab_size=50)
        >>> model = BertModel(cfg).eval()
        >>> df = probe(model, random_tokens=True, n_samples=2, n_tokens=8, metrics=["res_comp_rel"])
        >>> sorted(df.layer.unique().tolist()), model.config._attn_implementation
        ([0, 1, 2], 'sdpa')

    Returns:
        Tidy DataFrame: model, init, variant, mask, temperature, mode, layer, layer_kind
        ("embedding" for layer 0, "block" after; never a final-norm output), sample, metric,
        value (float64), at_floor, quantized.
    """
    # Every name and option is resolved once, here, before the model loads; a model loaded by
    # name needs its device visible (a model in memory stays where it is).
    options = {"temperature": temperature, "train_mode": train_mode, "batch_size": batch_size}
    request = resolve_probe(variants, mask, metrics, **options, keep_states=keep_states)
    inputs = ProbeInputs(text, random_tokens, padded, images, n_samples, n_tokens, seed)
    request.check_fits(inputs)
    where = parse_device(device) if is_in_memory(model) else resolve_device(device)
    source = ModelSource(model, init, seed, where, resolve_dtype(dtype), tokenizer=tokenizer)
    return run_probe(source.load(), inputs, request)


def run_probe(
    loaded: Measured,
    inputs: ProbeInputs,
    request: ProbeRequest,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """The probe of a loaded model: `request` measured on `inputs`, one row per (variant,
    layer, sample, metric); the columns of `probe`. `progress` is called per layer group and
    per forward pass (`measure.layers.Progress`)."""
    check_model(loaded, request.variants, inputs.n_tokens)
    batch = prepare_batch(loaded, request, *inputs.build(loaded))
    ids = {
        "model": loaded.name,
        "init": loaded.init,
        "mask": batch.mask_label,
        "temperature": request.temperature,
        "mode": "train" if request.train_mode else "eval",
    }
    kept: dict[str, list[list[Tensor]]] | None = {} if request.keep_states else None
    frames = measure_batch(loaded, batch, request, ids, kept, progress)
    frame = pd.concat(frames, ignore_index=True)
    frame["layer_kind"] = np.where(frame["layer"] == 0, "embedding", "block")
    frame["quantized"] = loaded.info.get("quantized", "no")
    first = [c for c in ID_COLUMNS if c in frame.columns]
    frame = frame[first + [c for c in frame.columns if c not in first]]
    if kept is not None:
        frame.attrs["states"] = {
            name: [torch.cat(chunks) for chunks in layers] for name, layers in kept.items()
        }
    return frame
