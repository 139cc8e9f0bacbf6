"""Real Hugging Face models through declarative adapters, hooks and a custom attention function."""

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
