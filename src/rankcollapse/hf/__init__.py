"""Real Hugging Face models through declarative adapters, hooks and a custom attention function.

- `load_model(name, *, init, seed, dtype, config_overrides)` -> `LoadedModel` (model in eval mode,
  tokenizer, `Architecture` adapter, provenance `info`); `MODELS` lists the names; `wrap_model`
  wraps any supported base model (e.g. a tiny test config).
- `ARCHITECTURES`: where each family keeps its blocks, attention, q/k/v/o, MLP and norms.
- `VARIANTS` (Dong's `san`, `san+mlp`, `san+skip`, `transformer`; Wu's `wu:*`), applied by hooks
  with `variant_applied`; `describe(variant, arch)` says exactly what each removes.
- `run_batch(loaded, input_ids, token_mask, *, on_layer, variant, mask, temperature, train_mode,
  attention)`: one forward pass streaming every layer's states (and attention) to a callback;
  `applied(...)` is the same setup as a context manager for your own hooks.
- `probe(...)` -> tidy DataFrame of per-layer metrics; `load_windows` / `load_paragraphs` /
  `sample_corpus` for inputs.
"""

from rankcollapse.hf.architectures import ARCHITECTURES, Architecture, architecture_for
from rankcollapse.hf.attention import AttentionSettings, attention_settings, custom_attention
from rankcollapse.hf.capture import LayerCapture, applied, run_batch
from rankcollapse.hf.models import MODELS, LoadedModel, load_model, wrap_model
from rankcollapse.hf.probe import probe
from rankcollapse.hf.qk_rank import qk_ranks
from rankcollapse.hf.text import load_paragraphs, load_windows, sample_corpus
from rankcollapse.hf.variants import (
    DONG_VARIANTS,
    VARIANTS,
    WU_VARIANTS,
    Variant,
    describe,
    get_variant,
    variant_applied,
)

__all__ = [
    "ARCHITECTURES",
    "DONG_VARIANTS",
    "MODELS",
    "VARIANTS",
    "WU_VARIANTS",
    "Architecture",
    "AttentionSettings",
    "LayerCapture",
    "LoadedModel",
    "Variant",
    "applied",
    "architecture_for",
    "attention_settings",
    "custom_attention",
    "describe",
    "get_variant",
    "load_model",
    "load_paragraphs",
    "load_windows",
    "probe",
    "qk_ranks",
    "run_batch",
    "sample_corpus",
    "variant_applied",
    "wrap_model",
]
