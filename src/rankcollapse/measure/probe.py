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
each layer's states are measured as soon as the block has run (float64, with the dtype-floor
flag of the model's dtype) and dropped unless `keep_states=True`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import Tensor, nn

from rankcollapse.devices import metrics_device, resolve_device, resolve_dtype
from rankcollapse.errors import ConfigError, InputError
from rankcollapse.hf.capture import LayerCapture
from rankcollapse.hf.images import pixel_inputs
from rankcollapse.hf.models import LoadedModel, load_model
from rankcollapse.hf.registry import Init
from rankcollapse.hf.text import (
    load_paragraphs,
    load_windows,
    random_token_ids,
)
from rankcollapse.masks import MaskSpec, as_mask_spec, causal
from rankcollapse.measure.kinds import (
    Measured,
    check_settings,
    check_variants,
    embedding_size,
    in_memory,
    is_causal,
    is_in_memory,
    n_positions,
    run_layers,
    takes_pixels,
)
from rankcollapse.metrics import (
    DEFAULT_METRICS,
    get_metric,
    measure_attention,
    measure_states,
    metrics_frame,
)
from rankcollapse.variants import Variant, parse_variant

CPU = torch.device("cpu")

ID_COLUMNS = ["model", "init", "variant", "mask", "temperature", "mode", "layer", "layer_kind"]


@dataclass(frozen=True)
class ModelSource:
    """Which model a probe measures and how it loads: a name of `MODELS`, a local model
    directory, a `LoadedModel`, or a model in memory (a Hugging Face model, a TransformerLens
    `HookedTransformer` or an nnsight wrapper of a Hugging Face model; then `tokenizer` is its
    tokenizer and the loading options are ignored). Hashable when `model` is a name, so a
    loader can cache by it."""

    model: str | Path | LoadedModel | nn.Module | Any
    init: Init = "pretrained"
    seed: int = 0
    device: torch.device = CPU
    dtype: torch.dtype = torch.float32
    n_layers: int | None = None
    """Depth of a random init (None: the model's own)."""
    tokenizer: Any = None
    """A tokenizer directory replacing a named model's own, or the tokenizer of a model in
    memory."""

    def load(self) -> Measured:
        if is_in_memory(self.model):
            return in_memory(self.model, tokenizer=self.tokenizer)
        return load_model(
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

    def build(self, loaded: Measured) -> tuple[Tensor, Tensor]:
        """(input ids or pixels, boolean token mask (b, n)) for this model: text windows,
        padded paragraphs, random token ids (from the tokenizer, or the config's vocabulary
        when there is none), random pixels, or up to `n_samples` images of a folder."""
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
                "--images (Python: images=), or pass a vision model (vit)."
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
        size = embedding_size(loaded)
        if not loaded.has_tokenizer:
            raise InputError(
                f"model '{loaded.name}' has no tokenizer (its directory holds no tokenizer "
                "files), so text cannot be tokenized. Pass --random-tokens (random ids from "
                f"the config's vocabulary of {size}) or a tokenizer directory "
                "with --tokenizer DIR (Python: tokenizer=...)."
            )
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
                "(--tokenizer DIR) or --random-tokens."
            )
        return ids, mask


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
    """Samples per forward pass (None: all)."""
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
    if isinstance(variants, str):
        variants = [name.strip() for name in variants.split(",") if name.strip()]
    resolved = tuple(parse_variant(v) for v in variants)
    if isinstance(metrics, str):
        metrics = [name.strip() for name in metrics.split(",") if name.strip()]
    names = list(DEFAULT_METRICS) if metrics is None else list(metrics)
    kinds = {name: get_metric(name).kind for name in names}
    state_metrics = tuple(n for n in names if kinds[n] == "states")
    attention_metrics = tuple(n for n in names if kinds[n] == "attention")
    if not resolved or not (state_metrics or attention_metrics):
        raise ConfigError(
            f"probe needs at least one variant and one metric, got variants={list(variants)}, "
            f"metrics={metrics}; see `rankcollapse variants` and `rankcollapse metrics`."
        )
    if batch_size is not None and batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {batch_size}.")
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


def resolve_mask(mask: MaskSpec | Tensor | None, n_tokens: int) -> tuple[Tensor | None, str]:
    """(boolean (n, n) mask or None, its label); None keeps the model's own pattern ("model")."""
    if mask is None:
        return None, "model"
    if isinstance(mask, MaskSpec):
        return mask.build(n_tokens), str(mask)
    return mask, "custom"


def _check_context(loaded: Measured, n_tokens: int) -> None:
    limit = n_positions(loaded)
    if limit is not None and limit < n_tokens:
        raise InputError(
            f"{n_tokens} tokens exceed the context of '{loaded.name}' ({limit} positions); "
            f"pass --n-tokens {limit} or fewer."
        )


def probe(
    model: str | LoadedModel | nn.Module | Any,
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
        model: a name of `MODELS`, a local model directory, a `LoadedModel`, or a model in
            memory, used as it is, not copied, and left as it was (hooks, attention
            implementation and modes restored, also after an error): a Hugging Face model
            (base model or one with a head), a TransformerLens `HookedTransformer` (states at
            its `hook_resid_pre` / `hook_resid_post`, attention at `hook_pattern`), or an
            nnsight `NNsight` / `LanguageModel` (measured as the model it wraps).
        tokenizer: the tokenizer of a model in memory (None: the model's own where it holds
            one, as a HookedTransformer or a LanguageModel does; else random tokens only).
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
        images: a folder of PNG or JPEG files for a vision model (ViT): up to `n_samples` of
            them in file-name order, resized to the model's image size and normalised as its
            directory's preprocessor_config.json says (mean and std 0.5 without one). None:
            random pixels.
        n_samples, n_tokens: windows of exactly `n_tokens` real tokens.
        metrics: names of `rankcollapse.metrics.METRICS` (default `DEFAULT_METRICS`); attention
            metrics are averaged over heads per sample.
        seed: seed of the random init, the window choice and random tokens.
        batch_size: samples per forward pass (default all).
        keep_states: also keep every layer's states: `frame.attrs["states"][variant]` is a list
            of (n_samples, n, d) float tensors, index = layer.
        device, dtype: where and in which parameter dtype a model given by name runs ("auto",
            "cpu", "cuda", "mps"; "float32", "bfloat16", "float16"). Metrics are float64 either
            way, flagged at the floor of the model's dtype.

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
    # Every name and option is resolved once, before the model loads.
    request = resolve_probe(
        variants,
        mask,
        metrics,
        temperature=temperature,
        train_mode=train_mode,
        batch_size=batch_size,
        keep_states=keep_states,
    )
    inputs = ProbeInputs(text, random_tokens, padded, images, n_samples, n_tokens, seed)
    request.check_fits(inputs)
    source = ModelSource(
        model, init, seed, resolve_device(device), resolve_dtype(dtype), tokenizer=tokenizer
    )
    return run_probe(source.load(), inputs, request)


def run_probe(loaded: Measured, inputs: ProbeInputs, request: ProbeRequest) -> pd.DataFrame:
    """The probe of a loaded model: `request` measured on `inputs`, one row per (variant,
    layer, sample, metric); the columns of `probe`."""
    check_variants(loaded, request.variants)
    if not takes_pixels(loaded):
        _check_context(loaded, inputs.n_tokens)
    input_ids, token_mask = inputs.build(loaded)
    n_samples = len(input_ids)  # a folder may hold fewer images than n_samples
    n_context = token_mask.shape[1]
    attn_mask, mask_label = resolve_mask(request.mask, n_context)
    check_settings(loaded, attn_mask, n_context, request.temperature)
    allowed = attn_mask
    if allowed is None and is_causal(loaded):
        allowed = causal(n_context)
    ids = {
        "model": loaded.name,
        "init": loaded.init,
        "mask": mask_label,
        "temperature": request.temperature,
        "mode": "train" if request.train_mode else "eval",
    }
    step = request.batch_size or n_samples
    frames: list[pd.DataFrame] = []
    kept: dict[str, list[list[Tensor]]] = {}
    for variant in request.variants:
        kept[variant.name] = []
        for start in range(0, n_samples, step):
            measure = _LayerMeasure(
                request,
                {**ids, "variant": variant.name},
                token_mask[start : start + step],
                allowed,
                metrics_device(loaded.device),
                start,
                frames,
                kept[variant.name],
            )
            run_layers(
                loaded,
                input_ids[start : start + step],
                token_mask[start : start + step],
                on_layer=measure,
                variant=variant,
                mask=attn_mask,
                temperature=request.temperature,
                train_mode=request.train_mode,
                attention=bool(request.attention_metrics),
                check=False,  # checked once above, for every batch and variant
            )
    frame = pd.concat(frames, ignore_index=True)
    frame["quantized"] = loaded.info.get("quantized", "no")
    first = [c for c in ID_COLUMNS if c in frame.columns]
    frame = frame[first + [c for c in frame.columns if c not in first]]
    if request.keep_states:
        frame.attrs["states"] = {
            name: [torch.cat(chunks) for chunks in layers] for name, layers in kept.items()
        }
    return frame


@dataclass
class _LayerMeasure:
    """The `on_layer` callback of one batch: measures each layer as it arrives, appending its
    rows (samples offset by `start`) to `frames` and, with `keep_states`, its states to `kept`."""

    request: ProbeRequest
    ids: dict[str, Any]
    token_mask: Tensor
    allowed: Tensor | None
    where: torch.device
    start: int
    frames: list[pd.DataFrame]
    kept: list[list[Tensor]]

    def __call__(self, c: LayerCapture) -> None:
        layer_ids = {
            **self.ids,
            "layer": c.layer,
            "layer_kind": "embedding" if c.layer == 0 else "block",
        }
        token_mask = self.token_mask.to(self.where)
        if self.request.state_metrics:
            values = measure_states(
                c.states.to(self.where),
                token_mask,
                metrics=list(self.request.state_metrics),
                source_dtype=c.states.dtype,
            )
            self.frames.append(_offset(metrics_frame(values, **layer_ids), self.start))
        if self.request.attention_metrics and c.attention is not None:
            allowed = None if self.allowed is None else self.allowed.to(self.where)
            frame = _attention_frame(
                c.attention.to(self.where),
                token_mask,
                allowed,
                list(self.request.attention_metrics),
                layer_ids,
            )
            self.frames.append(_offset(frame, self.start))
        if self.request.keep_states:
            if len(self.kept) <= c.layer:
                self.kept.append([])
            self.kept[c.layer].append(c.states.detach().to("cpu", copy=True))


def _offset(frame: pd.DataFrame, start: int) -> pd.DataFrame:
    frame["sample"] = frame["sample"] + start
    return frame


def _attention_frame(
    probs: Tensor,
    token_mask: Tensor,
    allowed: Tensor | None,
    names: list[str],
    layer_ids: dict[str, Any],
) -> pd.DataFrame:
    """Attention metrics per (sample, head), averaged over heads: one row per sample.

    `allowed` is the (n, n) pattern the model attended with (the injected mask, or causal for a
    decoder's own pattern); None = every real pair.
    """
    mask = token_mask[:, None, :]  # (b, 1, n): the same real tokens for every head
    edges = mask[..., None, :] & mask[..., :, None]  # (b, 1, n, n)
    if allowed is not None:
        edges = edges & allowed
    values = measure_attention(probs, mask, edges=edges, metrics=names)
    rows = []
    for name, mv in values.items():
        value = mv.value.mean(dim=1).cpu()  # (b,), on the host: one copy per metric
        at_floor = mv.at_floor.any(dim=1).cpu()
        for sample in range(probs.shape[0]):
            rows.append(
                {
                    **layer_ids,
                    "sample": sample,
                    "metric": name,
                    "value": float(value[sample]),
                    "at_floor": bool(at_floor[sample]),
                }
            )
    return pd.DataFrame(rows)
