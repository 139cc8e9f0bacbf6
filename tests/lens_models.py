"""Small TransformerLens models built from a config (no hub), for the tests of both of its model
classes: a `HookedTransformer` where the installed TransformerLens has it (3.x; 4.0 removed it,
and its tests skip saying so) and a `TransformerBridge` (3.9 and 4.x), of a Hugging Face GPT-2
or of TransformerLens's own native model (`TransformerBridge.boot_native`)."""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

import pytest
import torch

TL_REASON = 'the transformer-lens extra is not installed (pip install -e ".[transformer-lens]")'
CONFIG = {"n_layers": 3, "d_model": 16, "n_ctx": 12, "d_head": 4, "n_heads": 4, "d_mlp": 32,
          "d_vocab": 50, "act_fn": "gelu", "normalization_type": "LN", "seed": 0}  # fmt: skip
"""Three pre-LN blocks, GELU MLP, seeded: the config of both model classes."""
BRIDGES = ["gpt2", "native"]
"""What a bridge wraps in the tests: a Hugging Face GPT-2, TransformerLens's native model."""


def hooked_lens() -> Any:
    """The `transformer_lens` module where it has `HookedTransformer`; else the test (or the
    module, at its top) is skipped with the reason."""
    tl = pytest.importorskip("transformer_lens", reason=TL_REASON)
    try:
        tl.HookedTransformer  # noqa: B018 - TransformerLens 4 raises ImportError here
    except (ImportError, AttributeError):
        pytest.skip(
            f"TransformerLens {version('transformer-lens')} removed HookedTransformer (the "
            "bridge, tests/lens/test_bridge.py, is measured in its place)",
            allow_module_level=True,
        )
    return tl


def hooked_transformer(**overrides: Any) -> Any:
    """A float64 `HookedTransformer` of `CONFIG` (and `overrides`), or the test skips."""
    tl = hooked_lens()
    return tl.HookedTransformer(
        tl.HookedTransformerConfig(**{**CONFIG, "dtype": torch.float64, **overrides})
    )


def bridge(source: str = "native", **overrides: Any) -> Any:
    """A `TransformerBridge` around a model built here, seeded: `native`, TransformerLens's own
    model of `CONFIG` (and `overrides`) in float64; `gpt2`, a 2-layer float32 Hugging Face
    GPT-2 (`overrides`: its `vocab_size`)."""
    pytest.importorskip("transformer_lens.model_bridge", reason=TL_REASON)
    from transformer_lens.model_bridge import TransformerBridge

    if source == "native":
        return TransformerBridge.boot_native({**CONFIG, **overrides}, dtype=torch.float64)
    from transformer_lens.model_bridge.sources import build_bridge_from_module
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_embd=16, n_layer=2, n_head=2, vocab_size=overrides.get("vocab_size", 64),
                        n_positions=32, bos_token_id=0, eos_token_id=0)  # fmt: skip
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = GPT2LMHeadModel(config).eval()
    return build_bridge_from_module(model, "GPT2LMHeadModel", hf_config=config)
