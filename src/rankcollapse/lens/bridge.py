"""A TransformerLens `TransformerBridge` in memory (`transformer_lens.model_bridge`, the model
class of TransformerLens 4 and of 3.9 beside `HookedTransformer`), run through its own hook
points.

States are the residual stream at the bridge's block hooks: layer 0 = `blocks.0.hook_in` (its
`hook_resid_pre`), layer l = `blocks.{l-1}.hook_out` (`hook_resid_post`); the attention
probabilities are each block's `attn.hook_pattern`: the names and tensors of the bridge's own
`run_with_cache` (`tests/lens/test_bridge.py`, for a bridge of a Hugging Face model and one of
`TransformerBridge.boot_native`). The bridge runs the model it wraps with that model's own
code, so the probe's variants, masks and temperature (hooks on the residual stream of a
`HookedTransformer`, the attention function of a Hugging Face model) have no place to act here:
a bridge is measured as it is, and the refusal says so.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from rankcollapse.errors import ConfigError
from rankcollapse.hf.capture import LayerCapture, RunSettings, modes_kept
from rankcollapse.variants import Variant
from rankcollapse.lens.hooked import LensModel, block_capture, check_token_ids


def is_transformer_bridge(model: Any) -> bool:
    """Whether `model` is a TransformerLens `TransformerBridge` (checked by class, so this never
    imports TransformerLens).

    Example:
        >>> is_transformer_bridge(nn.Linear(2, 2))
        False
    """
    return any(
        cls.__name__ == "TransformerBridge" and cls.__module__.startswith("transformer_lens")
        for cls in type(model).__mro__
    )


@dataclass
class BridgeModel(LensModel):
    """A `TransformerBridge` (`LensModel`; the bridge's own tokenizer unless one is given)."""

    name: str = "transformer-bridge"

    @property
    def blocks(self) -> list[nn.Module]:
        return list(getattr(self.model, "blocks", None) or [])

    @property
    def n_positions(self) -> int | None:
        n_ctx = getattr(self.cfg, "n_ctx", None)
        return n_ctx if isinstance(n_ctx, int) and n_ctx > 0 else None

    @property
    def causal(self) -> bool:
        return getattr(self.cfg, "attention_dir", "causal") == "causal"

    @property
    def n_layers(self) -> int:
        return len(self.blocks)


def as_bridge(model: Any, *, tokenizer: Any = None) -> BridgeModel:
    """A `BridgeModel` of a `TransformerBridge` (or one already wrapped), not copied."""
    if isinstance(model, BridgeModel):
        return model
    tokenizer = tokenizer if tokenizer is not None else getattr(model, "tokenizer", None)
    name = getattr(model.cfg, "model_name", None)
    name = "transformer-bridge" if name in (None, "", "custom", "external", "native") else name
    return BridgeModel(
        model, name=str(name), tokenizer=tokenizer, info={"architecture": "transformer-lens bridge"}
    )


def check_bridge_variant(variant: Variant, bridge: BridgeModel) -> None:
    """A bridge is measured as it is: only the variant "transformer"."""
    if variant.name != "transformer":
        raise ConfigError(
            f"variant '{variant}' changes the blocks, but a TransformerBridge runs the model it "
            "wraps with that model's own code, where no hook of the bridge can take a branch "
            "out; measure the bridge with variants=['transformer'], or probe the Hugging Face "
            "model itself for the variants."
        )


def check_bridge_settings(bridge: BridgeModel, settings: RunSettings, n_tokens: int) -> None:
    """A bridge keeps its own attention pattern and temperature."""
    if settings.mask is not None or settings.temperature != 1.0:
        raise ConfigError(
            "a TransformerBridge is measured with its own attention pattern and temperature: "
            "drop mask/temperature, or probe the Hugging Face model itself with them."
        )


def bridge_capture(
    bridge: BridgeModel, on_layer: Callable[[LayerCapture], None], *, attention: bool
) -> AbstractContextManager[None]:
    """`block_capture` at a TransformerBridge's block hook points (`hook_in`, `hook_out`)."""
    blocks: Any = bridge.blocks  # TransformerLens types its blocks loosely
    return block_capture(blocks, on_layer, attention=attention, pre="hook_in", post="hook_out")


def run_bridge(
    bridge: BridgeModel,
    input_ids: Tensor,
    token_mask: Tensor | None = None,
    *,
    on_layer: Callable[[LayerCapture], None],
    settings: RunSettings | None = None,
) -> None:
    """One forward pass of a `TransformerBridge`; `on_layer` gets every layer's state as soon
    as it exists (the arguments of `rankcollapse.hf.run_batch`, for this model)."""
    settings = settings or RunSettings()
    if token_mask is None:
        token_mask = torch.ones(input_ids.shape, dtype=torch.bool)
    check_bridge_variant(settings.variant, bridge)
    check_bridge_settings(bridge, settings, token_mask.shape[-1])
    check_token_ids(input_ids, bridge.embedding_size)
    stream_bridge(bridge, input_ids, token_mask, on_layer=on_layer, settings=settings)


def stream_bridge(
    bridge: BridgeModel,
    input_ids: Tensor,
    token_mask: Tensor,
    *,
    on_layer: Callable[[LayerCapture], None],
    settings: RunSettings,
) -> None:
    """`run_bridge` with settings and ids its caller checked once for all its batches (the
    probe's passes, `measure.kinds`)."""
    device, model = bridge.device, bridge.model
    with ExitStack() as stack:
        stack.enter_context(bridge_capture(bridge, on_layer, attention=settings.attention))
        stack.enter_context(modes_kept(model))
        stack.enter_context(torch.no_grad())
        model.train(settings.train_mode)
        model(
            input_ids.to(device),
            attention_mask=token_mask.to(device).long(),
            return_type=None,
        )
