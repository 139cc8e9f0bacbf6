"""Real Hugging Face models through declarative adapters, hooks and a custom attention function.

- `load_model(name, *, init, seed, dtype, device, n_layers, config_overrides, tokenizer)` -> `LoadedModel`
  (model in eval mode, tokenizer or None, `Architecture` adapter, provenance `info`;
  `load_resolved`: the same with a `torch.device` its caller resolved, not checked again);
  `wrap_model` / `as_loaded` take a model already in memory (base model or one with a head),
  without a copy (`hf.models`, the loader).
- `MODELS` is the model registry (family, sizes, causal, decomposable, default init, a preset's
  config; `text_model_type` is a config field of its text models) and `tiny_config(family)` a
  2-layer config of any family (`hf.registry`, data only); `tiny_model(family)` builds it.
- `ARCHITECTURES`: one adapter per family (where it keeps its blocks, attention, q/k/v/o, MLP
  and norms, the class that holds them, and its quirks).
- `VARIANTS` (Dong's `san`, `san+mlp`, `san+skip`, `transformer`; Wu's `wu:*`; the authors'
  own surgery `dong-authors:*`; the vocabulary of `rankcollapse.variants`, re-exported with
  `parse_variant`), applied by hooks with `variant_applied`; `describe(variant, arch)` says
  exactly what each removes.
- `run_batch(loaded, input_ids, token_mask, *, on_layer, settings)`: one forward pass
  streaming every layer's states (and attention) to a callback
  (`RunSettings`: variant, mask, temperature, mode, attention captured; `stream_batch`: the
  same with settings checked once by `check_run`);
  `applied(loaded, settings)` is the same setup as a context manager for your own hooks;
  `blocks_captured(blocks, on_layer)` the same capture on the blocks of any module, and
  `modes_kept(model)` puts every submodule's mode back. The checks before a forward pass:
  `check_variant(variant, arch)`, `check_run(loaded, settings, n_tokens)` (`check_variant(variant, arch)`,
  `check_attention_settings(loaded, settings, n_tokens)`), `check_temperature(T)`.
- Inputs: `load_windows` / `load_paragraphs` / `sample_corpus` / `load_images`;
  `random_token_ids`, `pixel_inputs`.

Measuring a model (the probe, real models' curves, the monitor) is `rankcollapse.measure`,
one floor up; `hf` is the plumbing it measures through.
"""

from rankcollapse.hf.architectures import ARCHITECTURES, Architecture, architecture_for
from rankcollapse.hf.attention import AttentionSettings, attention_settings, custom_attention
from rankcollapse.hf.capture import (
    LayerCapture,
    RunSettings,
    applied,
    blocks_captured,
    check_attention_settings,
    check_run,
    check_temperature,
    modes_kept,
    run_batch,
    stream_batch,
)
from rankcollapse.hf.images import load_images, pixel_inputs
from rankcollapse.hf.models import (
    LoadedModel,
    as_loaded,
    load_model,
    load_resolved,
    tiny_model,
    wrap_model,
)
from rankcollapse.hf.qk_rank import qk_ranks
from rankcollapse.hf.registry import (
    MODELS,
    Init,
    ModelSpec,
    model_entry,
    text_model_type,
    text_models,
    tiny_config,
)
from rankcollapse.hf.text import load_paragraphs, load_windows, random_token_ids, sample_corpus
from rankcollapse.hf.variants import check_variant, describe, variant_applied
from rankcollapse.variants import (
    AUTHORS_VARIANTS,
    DONG_VARIANTS,
    VARIANTS,
    WU_VARIANTS,
    Variant,
    parse_variant,
)

__all__ = [
    "ARCHITECTURES",
    "AUTHORS_VARIANTS",
    "DONG_VARIANTS",
    "MODELS",
    "VARIANTS",
    "WU_VARIANTS",
    "Architecture",
    "AttentionSettings",
    "Init",
    "LayerCapture",
    "LoadedModel",
    "ModelSpec",
    "RunSettings",
    "Variant",
    "applied",
    "architecture_for",
    "as_loaded",
    "attention_settings",
    "blocks_captured",
    "check_attention_settings",
    "check_run",
    "check_temperature",
    "check_variant",
    "custom_attention",
    "describe",
    "load_images",
    "load_model",
    "load_paragraphs",
    "load_resolved",
    "load_windows",
    "model_entry",
    "modes_kept",
    "parse_variant",
    "pixel_inputs",
    "qk_ranks",
    "random_token_ids",
    "run_batch",
    "sample_corpus",
    "stream_batch",
    "text_model_type",
    "text_models",
    "tiny_config",
    "tiny_model",
    "variant_applied",
    "wrap_model",
]
