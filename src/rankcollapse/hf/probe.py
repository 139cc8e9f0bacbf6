"""Probe a real model: per-layer metrics of its residual stream, for several variants, as a
tidy DataFrame. The Python twin of `rankcollapse probe`.

Metrics stream: each layer's states are measured as soon as the block has run (float64, with
the dtype-floor flag of the model's dtype) and dropped unless `keep_states=True`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import Tensor, nn

from rankcollapse.devices import metrics_device, resolve_dtype
from rankcollapse.errors import ConfigError, InputError
from rankcollapse.hf.capture import (
    LayerCapture,
    check_attention_settings,
    run_batch,
)
from rankcollapse.hf.images import pixel_inputs
from rankcollapse.hf.models import Init, LoadedModel, as_loaded
from rankcollapse.hf.text import (
    load_paragraphs,
    load_windows,
    random_token_ids,
)
from rankcollapse.hf.variants import Variant, check_variant, get_variant
from rankcollapse.masks import MaskSpec, causal, parse_mask_spec
from rankcollapse.metrics import (
    DEFAULT_METRICS,
    get_metric,
    measure_attention,
    measure_states,
    metrics_frame,
)

ID_COLUMNS = ["model", "init", "variant", "mask", "temperature", "mode", "layer", "layer_kind"]


@dataclass(frozen=True)
class ProbeRequest:
    """What a probe measures, resolved once from names, before any model loads."""

    variants: tuple[Variant, ...]
    mask: MaskSpec | Tensor | None
    """A parsed mask spec, a boolean (n, n) tensor, or None: the model's own pattern."""
    metrics: tuple[str, ...]
    """Metric names of `rankcollapse.metrics.METRICS` (states metrics, then attention ones)."""


def resolve_probe(
    variants: str | Sequence[str | Variant] = ("transformer",),
    mask: str | MaskSpec | Tensor | None = None,
    metrics: str | Sequence[str] | None = None,
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
    resolved = tuple(get_variant(v) if isinstance(v, str) else v for v in variants)
    if isinstance(metrics, str):
        metrics = [name.strip() for name in metrics.split(",") if name.strip()]
    state_metrics, attention_metrics = _split_metrics(metrics)
    if not resolved or not (state_metrics or attention_metrics):
        raise ConfigError(
            f"probe needs at least one variant and one metric, got variants={list(variants)}, "
            f"metrics={metrics}; see `rankcollapse variants` and `rankcollapse metrics`."
        )
    if isinstance(mask, str):
        mask = None if mask == "model" else parse_mask_spec(mask)
    return ProbeRequest(resolved, mask, (*state_metrics, *attention_metrics))


def resolve_mask(mask: MaskSpec | Tensor | None, n_tokens: int) -> tuple[Tensor | None, str]:
    """(boolean (n, n) mask or None, its label); None keeps the model's own pattern ("model")."""
    if mask is None:
        return None, "model"
    if isinstance(mask, MaskSpec):
        return mask(n_tokens), str(mask)
    return mask, "custom"


def _split_metrics(metrics: Sequence[str] | None) -> tuple[list[str], list[str]]:
    names = list(DEFAULT_METRICS) if metrics is None else list(metrics)
    kinds = {name: get_metric(name).kind for name in names}
    return [n for n in names if kinds[n] == "states"], [n for n in names if kinds[n] == "attention"]


def _check_context(loaded: LoadedModel, n_tokens: int) -> None:
    limit = getattr(loaded.model.config, "max_position_embeddings", None)
    if limit is not None and 0 < limit < n_tokens:
        raise InputError(
            f"{n_tokens} tokens exceed the context of '{loaded.name}' ({limit} positions); "
            f"pass --n-tokens {limit} or fewer."
        )


def model_inputs(
    loaded: LoadedModel,
    *,
    text: str | Path | None = None,
    random_tokens: bool = False,
    padded: bool = False,
    images: str | Path | None = None,
    n_samples: int = 32,
    n_tokens: int = 128,
    seed: int = 0,
) -> tuple[Tensor, Tensor]:
    """The probe's inputs and token mask: text windows, padded paragraphs, random token ids
    (from the tokenizer, or the config's vocabulary when there is none), random pixels, or up
    to `n_samples` images of a folder (vision models)."""
    config = loaded.model.config
    if loaded.arch.inputs == "pixels":
        return pixel_inputs(
            loaded, text=text, padded=padded, images=images, n_samples=n_samples, seed=seed
        )
    if images is not None:
        raise InputError(
            f"model '{loaded.name}' ({loaded.arch.name}) takes text, not images; drop --images "
            "(Python: images=), or pass a vision model (vit)."
        )
    if random_tokens:
        vocabulary = loaded.vocabulary  # no tokenizer is loaded for random ids
        return random_token_ids(
            vocabulary.size, vocabulary.special, n_samples=n_samples, n_tokens=n_tokens, seed=seed
        )
    if not loaded.has_tokenizer:
        raise InputError(
            f"model '{loaded.name}' has no tokenizer (its directory holds no tokenizer "
            "files), so text cannot be tokenized. Pass --random-tokens (random ids from the "
            f"config's vocabulary of {config.vocab_size}) or a tokenizer directory with "
            "--tokenizer DIR (Python: tokenizer=...)."
        )
    if padded:
        ids, mask = load_paragraphs(
            loaded.tokenizer, text=text, n_samples=n_samples, max_tokens=n_tokens
        )
    else:
        ids, mask = load_windows(
            loaded.tokenizer,
            text=text,
            n_samples=n_samples,
            n_tokens=n_tokens,
            seed=seed,
        )
    if int(ids.max()) >= config.vocab_size:
        raise InputError(
            f"the tokenizer of '{loaded.name}' gives ids up to {int(ids.max())} but the model's "
            f"embedding has {config.vocab_size}; pass the model's own tokenizer (--tokenizer DIR) "
            "or --random-tokens."
        )
    return ids, mask


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
    request = resolve_probe(variants, mask, metrics)
    variant_objs, mask = request.variants, request.mask
    state_metrics, attention_metrics = _split_metrics(request.metrics)
    if batch_size is not None and batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {batch_size}.")
    if isinstance(mask, MaskSpec) and not padded:
        mask(n_tokens)  # parameters that do not fit n_tokens fail here, not after loading
    loaded = as_loaded(
        model, tokenizer=tokenizer, init=init, seed=seed, device=device, dtype=resolve_dtype(dtype)
    )
    for variant in variant_objs:
        check_variant(variant, loaded.arch)
    if loaded.arch.inputs == "tokens":
        _check_context(loaded, n_tokens)
    input_ids, token_mask = model_inputs(
        loaded,
        text=text,
        random_tokens=random_tokens,
        padded=padded,
        images=images,
        n_samples=n_samples,
        n_tokens=n_tokens,
        seed=seed,
    )
    n_samples = len(input_ids)  # a folder may hold fewer images than n_samples
    n_context = token_mask.shape[1]
    attn_mask, mask_label = resolve_mask(mask, n_context)
    check_attention_settings(loaded, attn_mask, n_context, temperature)
    where = metrics_device(loaded.device)
    step = batch_size or n_samples
    allowed = attn_mask
    if allowed is None and loaded.arch.causal:
        allowed = causal(n_context)

    ids = {
        "model": loaded.name,
        "init": loaded.init,
        "mask": mask_label,
        "temperature": temperature,
        "mode": "train" if train_mode else "eval",
    }
    frames: list[pd.DataFrame] = []
    kept: dict[str, list[list[Tensor]]] = {}
    for variant in variant_objs:
        kept[variant.name] = []
        for start in range(0, n_samples, step):
            batch_ids = input_ids[start : start + step]
            batch_mask = token_mask[start : start + step]

            def on_layer(
                c: LayerCapture, start=start, batch_mask=batch_mask, variant=variant
            ) -> None:
                layer_ids = {
                    **ids,
                    "variant": variant.name,
                    "layer": c.layer,
                    "layer_kind": "embedding" if c.layer == 0 else "block",
                }
                if state_metrics:
                    values = measure_states(
                        c.states.to(where),
                        batch_mask.to(where),
                        metrics=state_metrics,
                        source_dtype=c.states.dtype,
                    )
                    frames.append(_offset(metrics_frame(values, **layer_ids), start))
                if attention_metrics and c.attention is not None:
                    frames.append(
                        _offset(
                            _attention_frame(
                                c.attention.to(where),
                                batch_mask.to(where),
                                None if allowed is None else allowed.to(where),
                                attention_metrics,
                                layer_ids,
                            ),
                            start,
                        )
                    )
                if keep_states:
                    per_layer = kept[variant.name]
                    if len(per_layer) <= c.layer:
                        per_layer.append([])
                    per_layer[c.layer].append(c.states.detach().to("cpu", copy=True))

            run_batch(
                loaded,
                batch_ids,
                batch_mask,
                on_layer=on_layer,
                variant=variant,
                mask=attn_mask,
                temperature=temperature,
                train_mode=train_mode,
                attention=bool(attention_metrics),
            )
    frame = pd.concat(frames, ignore_index=True)
    frame["quantized"] = loaded.info.get("quantized", "no")
    first = [c for c in ID_COLUMNS if c in frame.columns]
    frame = frame[first + [c for c in frame.columns if c not in first]]
    if keep_states:
        frame.attrs["states"] = {
            name: [torch.cat(chunks) for chunks in layers] for name, layers in kept.items()
        }
    return frame


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
