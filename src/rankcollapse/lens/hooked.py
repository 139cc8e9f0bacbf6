"""A TransformerLens `HookedTransformer` in memory, run through its own hook points (the model
class of TransformerLens 3; TransformerLens 4 removed it, and there no model is one, so only
the bridge of `lens.bridge` is measured).

States are the residual stream at the model's hooks: layer 0 = `blocks.0.hook_resid_pre`,
layer l = `blocks.{l-1}.hook_resid_post` (the final norm is never applied, as for every model
of the probe). The attention probabilities are the model's own `attn.hook_pattern`. Variants,
masks and temperature are forward hooks on its hook points, removed on leaving, also after an
error; nothing else of the model changes (its `cfg.attention_dir` is put back).

Variants (the vocabulary of `rankcollapse.variants`; TransformerLens blocks are pre-LN,
y = x + A(Norm_1(x)), z = y + M(Norm_2(y))):
- MLP block removed: `hook_mlp_out` returns zeros, z = y + 0 (an attention-only model,
  `cfg.attn_only`, has none: it is its own "san+skip").
- attention skip removed: `hook_resid_mid` (attention-only: `hook_resid_post`) returns the
  block's `hook_attn_out`, y = A(Norm_1(x)) exactly (no subtraction).
- norms removed: `ln1` and `ln2` return their input.
A parallel block (`cfg.parallel_attn_mlp`) has no `hook_resid_mid` to take the skip out at, and
the authors' surgery (`dong-authors:*`) is defined for BERT, ALBERT and XLNet only: both are
refused with the reason.

Masks and temperature go through `attn.hook_attn_scores` (the scaled scores, before the
softmax): logits / T, and a mask replaces the model's own pattern (its causal mask is switched
off for the pass by `cfg.attention_dir = "bidirectional"`). Pads never enter as keys.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from rankcollapse.errors import ConfigError, InputError
from rankcollapse.hf.capture import LayerCapture, RunSettings, modes_kept
from rankcollapse.hf.models import Placed, Vocabulary
from rankcollapse.masks import check_mask
from rankcollapse.variants import Variant

EXTRA = "transformer-lens"


def is_hooked_transformer(model: Any) -> bool:
    """Whether `model` is a TransformerLens `HookedTransformer` (checked by class, so this
    never imports TransformerLens).

    Example:
        >>> is_hooked_transformer(nn.Linear(2, 2))
        False
    """
    return any(
        cls.__name__ == "HookedTransformer" and cls.__module__.startswith("transformer_lens")
        for cls in type(model).__mro__
    )


@dataclass
class LensModel(Placed):
    """A TransformerLens model in memory, used as it is (never copied), with its tokenizer (the
    model's own `tokenizer` unless one is given) and provenance `info`: what a
    `HookedTransformer` and a `TransformerBridge` share (both have `cfg.d_vocab`)."""

    model: nn.Module
    name: str = "transformer-lens"
    init: str = "in-memory"
    tokenizer: Any = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def cfg(self) -> Any:
        return self.model.cfg

    @property
    def has_tokenizer(self) -> bool:
        return self.tokenizer is not None

    @property
    def vocabulary(self) -> Vocabulary:
        """Random ids come from the tokenizer's vocabulary, else `cfg.d_vocab` (no specials)."""
        if self.tokenizer is not None:
            return Vocabulary.of(self.tokenizer)
        return Vocabulary(self.embedding_size, frozenset())

    @property
    def embedding_size(self) -> int:
        """Rows of the token embedding (ids must stay below)."""
        return int(self.cfg.d_vocab)


@dataclass
class HookedModel(LensModel):
    """A `HookedTransformer` (`LensModel`)."""

    name: str = "hooked-transformer"

    @property
    def blocks(self) -> list[Any]:
        """Its blocks, each with its hook points (TransformerLens types them loosely)."""
        blocks: Any = self.model.blocks
        return list(blocks)

    @property
    def n_positions(self) -> int:
        return int(self.cfg.n_ctx)

    @property
    def causal(self) -> bool:
        return self.cfg.attention_dir == "causal"

    @property
    def n_layers(self) -> int:
        return int(self.cfg.n_layers)


def as_hooked(model: Any, *, tokenizer: Any = None) -> HookedModel:
    """A `HookedModel` of a `HookedTransformer` (or one already wrapped), not copied."""
    if isinstance(model, HookedModel):
        return model
    tokenizer = tokenizer if tokenizer is not None else getattr(model, "tokenizer", None)
    name = getattr(model.cfg, "model_name", None)
    name = "hooked-transformer" if name in (None, "", "custom") else name
    return HookedModel(model, name=str(name), tokenizer=tokenizer,
                       info={"architecture": "transformer-lens"})  # fmt: skip


def check_hooked_variant(variant: Variant, hooked: HookedModel) -> None:
    """Fail before any work for a variant this model's hook points cannot realise."""
    cfg = hooked.cfg
    if variant.family == "dong-authors":
        raise ConfigError(
            f"variant '{variant}' is the authors' surgery of BERT, ALBERT and XLNet; a "
            "HookedTransformer takes the variants of Dong et al. and Wu et al. (san, san+mlp, "
            "san+skip, transformer, wu:*)."
        )
    if cfg.attn_only and variant.mlp and variant.short != "transformer":
        raise ConfigError(
            f"variant '{variant}' keeps the MLP block but this HookedTransformer is "
            "attention-only (cfg.attn_only): it has none. Use san, san+skip (the model as it "
            "is) or transformer."
        )
    if cfg.parallel_attn_mlp and not variant.attention_skip:
        raise ConfigError(
            f"variant '{variant}' removes the attention skip, but this HookedTransformer's "
            "blocks are parallel (cfg.parallel_attn_mlp): attention and MLP read the same "
            "input and it has no hook_resid_mid to take the skip out at. Use san+skip or "
            "transformer."
        )


def check_hooked_settings(hooked: HookedModel, settings: RunSettings, n_tokens: int) -> None:
    """Fail before any work when the settings' mask or temperature cannot be applied to this
    model (the temperature itself is checked where the settings are made)."""
    cfg, mask = hooked.cfg, settings.mask
    if (mask is not None or settings.temperature != 1.0) and (
        cfg.positional_embedding_type == "alibi" or getattr(cfg, "use_attention_sinks", False)
    ):
        raise ConfigError(
            "this HookedTransformer adds ALiBi biases or attention sinks after its scores "
            "hook, so a mask or temperature there would not be the whole softmax's; drop "
            "mask/temperature."
        )
    if mask is not None:
        check_mask(mask, n_tokens)


def _scores_hook(mask: Tensor | None, keys: Tensor | None, temperature: float) -> Callable:
    """A forward hook on `hook_attn_scores`: logits / T, then -inf outside the allowed
    (query, key) pairs of `mask` (n, n) and the real keys `keys` (b, n)."""
    allowed = None
    if mask is not None:
        allowed = mask[None, None]
    if keys is not None:
        real = keys[:, None, None, :]
        allowed = real if allowed is None else allowed & real

    def hook(module, args, scores):
        if temperature != 1.0:
            scores = scores / temperature
        if allowed is not None:
            scores = scores.masked_fill(~allowed, -math.inf)
        return scores

    return hook


def _identity(module, args, output):
    return args[0]


def _zeros(module, args, output):
    return torch.zeros_like(output)


class _Branch:
    """Keeps a block's attention branch (`hook_attn_out`) and hands it on in place of the
    residual sum after it."""

    def keep(self, module, args, output):
        self.output = output

    def take(self, module, args, output):
        return self.output


@contextmanager
def hooked_variant(hooked: HookedModel, variant: Variant) -> Iterator[None]:
    """Inside this block the model runs as `variant` (hooks removed on leaving)."""
    cfg, handles = hooked.cfg, []
    try:
        for block in hooked.blocks:
            if not variant.mlp and not cfg.attn_only:
                handles.append(block.hook_mlp_out.register_forward_hook(_zeros))
            if not variant.attention_skip:
                branch = _Branch()
                after = block.hook_resid_post if cfg.attn_only else block.hook_resid_mid
                handles.append(block.hook_attn_out.register_forward_hook(branch.keep))
                handles.append(after.register_forward_hook(branch.take))
            if not variant.norms:
                for name in ("ln1", "ln2"):
                    if hasattr(block, name):
                        handles.append(getattr(block, name).register_forward_hook(_identity))
        yield
    finally:
        for handle in handles:
            handle.remove()


@contextmanager
def hooked_attention(
    hooked: HookedModel, mask: Tensor | None, token_mask: Tensor, temperature: float
) -> Iterator[None]:
    """Inside this block every attention takes `mask` (replacing its own pattern), the
    temperature and the pads as keys; nothing is hooked when none applies."""
    keys = None if bool(token_mask.all()) else token_mask
    if mask is None and keys is None and temperature == 1.0:
        yield
        return
    cfg, direction = hooked.cfg, hooked.cfg.attention_dir
    hook = _scores_hook(mask, keys, temperature)
    handles = [b.attn.hook_attn_scores.register_forward_hook(hook) for b in hooked.blocks]
    try:
        if mask is not None:
            cfg.attention_dir = "bidirectional"
        yield
    finally:
        cfg.attention_dir = direction
        for handle in handles:
            handle.remove()


def check_token_ids(input_ids: Tensor, embedding_size: int) -> None:
    """Every token id below the embedding's rows (and >= 0), or a clear error."""
    if int(input_ids.max()) >= embedding_size or int(input_ids.min()) < 0:
        raise InputError(
            f"token ids run from {int(input_ids.min())} to {int(input_ids.max())} but the "
            f"model's embedding has {embedding_size} rows; pass its own tokenizer or "
            "random_tokens=True."
        )


@contextmanager
def block_capture(
    blocks: Sequence[Any],
    on_layer: Callable[[LayerCapture], None],
    *,
    attention: bool,
    pre: str,
    post: str,
) -> Iterator[None]:
    """Inside this block each forward pass hands `on_layer` layer 0 (`blocks[0].<pre>`) and
    each `blocks[l-1].<post>` as layer l, with the block's `attn.hook_pattern` when `attention`
    (TransformerLens's hook points: `hook_resid_pre`/`hook_resid_post` on a HookedTransformer,
    `hook_in`/`hook_out` on a TransformerBridge); hooks removed on leaving, also after an
    error. Registered last, so it sees what a variant's hooks returned."""
    state: dict[str, Any] = {"probs": None}

    def first(module, args, out):
        on_layer(LayerCapture(0, out))

    def pattern(module, args, out):
        state["probs"] = out

    def after(layer: int) -> Callable:
        def hook(module, args, out):
            probs, state["probs"] = state["probs"], None
            on_layer(LayerCapture(layer, out, probs))

        return hook

    handles = [getattr(blocks[0], pre).register_forward_hook(first)]
    if attention:
        handles += [b.attn.hook_pattern.register_forward_hook(pattern) for b in blocks]
    handles += [getattr(b, post).register_forward_hook(after(i + 1)) for i, b in enumerate(blocks)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def hooked_capture(
    hooked: HookedModel, on_layer: Callable[[LayerCapture], None], *, attention: bool
) -> AbstractContextManager[None]:
    """`block_capture` at a HookedTransformer's residual hook points."""
    return block_capture(
        hooked.blocks, on_layer, attention=attention, pre="hook_resid_pre", post="hook_resid_post"
    )


def run_hooked(
    hooked: HookedModel,
    input_ids: Tensor,
    token_mask: Tensor | None = None,
    *,
    on_layer: Callable[[LayerCapture], None],
    settings: RunSettings | None = None,
) -> None:
    """One forward pass of a `HookedTransformer`; `on_layer` gets every layer's state as soon
    as it exists (the arguments of `rankcollapse.hf.run_batch`, for this model: the settings
    checked against it here). `tests/lens/test_hooked.py` checks every state and pattern
    against `run_with_cache`.
    """
    settings = settings or RunSettings()
    if token_mask is None:
        token_mask = torch.ones(input_ids.shape, dtype=torch.bool)
    check_hooked_variant(settings.variant, hooked)
    check_hooked_settings(hooked, settings, token_mask.shape[-1])
    check_token_ids(input_ids, hooked.embedding_size)
    stream_hooked(hooked, input_ids, token_mask, on_layer=on_layer, settings=settings)


def stream_hooked(
    hooked: HookedModel,
    input_ids: Tensor,
    token_mask: Tensor,
    *,
    on_layer: Callable[[LayerCapture], None],
    settings: RunSettings,
) -> None:
    """`run_hooked` with settings and ids its caller checked once for all its batches (the
    probe's passes, `measure.kinds`)."""
    device = hooked.device
    input_ids, token_mask = input_ids.to(device), token_mask.to(device)
    mask = None if settings.mask is None else settings.mask.to(device)
    model = hooked.model
    with ExitStack() as stack:
        stack.enter_context(hooked_variant(hooked, settings.variant))
        stack.enter_context(hooked_attention(hooked, mask, token_mask, settings.temperature))
        stack.enter_context(hooked_capture(hooked, on_layer, attention=settings.attention))
        stack.enter_context(modes_kept(model))
        stack.enter_context(torch.no_grad())
        model.train(settings.train_mode)
        model(input_ids, stop_at_layer=hooked.n_layers)
