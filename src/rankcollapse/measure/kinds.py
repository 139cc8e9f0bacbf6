"""The kinds of model the probe and the monitor measure, and the one place where they differ:
a Hugging Face model (`rankcollapse.hf`: adapters, hooks, a registered attention function), a
TransformerLens `HookedTransformer` (`rankcollapse.lens.run_hooked`: its own hook points) and an
nnsight wrapper, measured as the Hugging Face model it wraps. Everything else (inputs, metrics,
rows) is shared."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from torch import Tensor, nn

from rankcollapse.hf.capture import check_attention_settings, run_batch
from rankcollapse.hf.models import LoadedModel, as_loaded
from rankcollapse.hf.variants import check_variant
from rankcollapse.lens import (
    HookedModel,
    as_hooked,
    check_hooked_settings,
    check_hooked_variant,
    is_hooked_transformer,
    is_nnsight,
    run_hooked,
    unwrap_nnsight,
)
from rankcollapse.variants import Variant

Measured = LoadedModel | HookedModel


def is_in_memory(model: Any) -> bool:
    """Whether `model` is a model object (not a name or directory to load)."""
    return isinstance(model, (LoadedModel, HookedModel, nn.Module)) or is_nnsight(model)


def knows(model: Any) -> bool:
    """Whether the probe measures `model` without being told its blocks: a Hugging Face model
    (a config with a `model_type`), a `HookedTransformer`, an nnsight wrapper, or one of them
    already wrapped."""
    return (
        isinstance(model, (LoadedModel, HookedModel))
        or is_nnsight(model)
        or is_hooked_transformer(model)
        or hasattr(getattr(model, "config", None), "model_type")
    )


def in_memory(model: Any, *, tokenizer: Any = None) -> Measured:
    """A model in memory as it is measured, never copied: a `HookedTransformer` as a
    `HookedModel`, an nnsight wrapper as the Hugging Face model it holds (with the wrapper's
    tokenizer), any other as a `LoadedModel`."""
    if is_nnsight(model):
        model, tokenizer = unwrap_nnsight(model, tokenizer)
    if isinstance(model, HookedModel) or is_hooked_transformer(model):
        return as_hooked(model, tokenizer=tokenizer)
    return as_loaded(model, tokenizer=tokenizer)


def check_variants(loaded: Measured, variants: Iterable[Variant]) -> None:
    """Fail before any work for a variant the model cannot realise."""
    for variant in variants:
        if isinstance(loaded, HookedModel):
            check_hooked_variant(variant, loaded)
        else:
            check_variant(variant, loaded.arch)


def check_settings(loaded: Measured, mask: Tensor | None, n_tokens: int, temperature: float):
    """Fail before any work when a mask or temperature cannot be applied to this model."""
    if isinstance(loaded, HookedModel):
        check_hooked_settings(loaded, mask, n_tokens, temperature)
    else:
        check_attention_settings(loaded, mask, n_tokens, temperature)


def n_positions(loaded: Measured) -> int | None:
    """The longest input the model takes (None: no limit known)."""
    if isinstance(loaded, HookedModel):
        return loaded.n_positions
    limit = getattr(loaded.model.config, "max_position_embeddings", None)
    return limit if isinstance(limit, int) and limit > 0 else None


def embedding_size(loaded: Measured) -> int:
    """Rows of the token embedding: every token id must be below."""
    if isinstance(loaded, HookedModel):
        return loaded.embedding_size
    return int(loaded.model.config.vocab_size)


def is_causal(loaded: Measured) -> bool:
    """Whether the model's own attention pattern is causal."""
    return loaded.causal if isinstance(loaded, HookedModel) else loaded.arch.causal


def takes_pixels(loaded: Measured) -> bool:
    return isinstance(loaded, LoadedModel) and loaded.arch.inputs == "pixels"


def run_layers(loaded: Measured, input_ids: Tensor, token_mask: Tensor | None, **options) -> None:
    """One forward pass streaming every layer (`rankcollapse.hf.run_batch`'s arguments)."""
    run = run_hooked if isinstance(loaded, HookedModel) else run_batch
    run(loaded, input_ids, token_mask, **options)
