"""Run a real model with a variant, mask and temperature applied, and stream its states.

`run_batch` is the one forward pass every probe goes through: it installs the variant's hooks
(`variants.py`), the custom attention (`attention.py`) when a mask, a temperature or the
attention probabilities need it, and capture hooks that hand each layer's residual-stream state to
a callback as soon as the block has run. Nothing is kept unless the callback keeps it, so metrics
stream layer by layer and peak memory stays near one layer's activations.

States are the raw outputs of the blocks (layer 0 = the input of the first block, i.e. the
embedding output; ALBERT: after its embedding projection). The final norm of pre-LN models
(GPT-2's ln_f, Llama's norm) is never applied: for post-LN models every state is a norm output,
for pre-LN models none is (the two are never mixed in one curve; docs/methods.md, sec. 4).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from rankcollapse.errors import ConfigError, option
from rankcollapse.hf.architectures import ARCHITECTURES, Architecture, block_list, submodule
from rankcollapse.hf.attention import AttentionSettings, attention_settings
from rankcollapse.hf.models import LoadedModel
from rankcollapse.hf.variants import check_variant, variant_applied
from rankcollapse.masks import check_mask
from rankcollapse.variants import Variant, parse_variant


@dataclass(frozen=True)
class LayerCapture:
    """What a callback receives after each layer.

    Attributes:
        layer: 0 for the embedding output, l for the output of block l (1-based).
        states: (b, n, d) residual stream; for pre-LN models the raw stream, never final-normed.
        attention: (b, h, n, n) probabilities of block `layer` (before dropout), or None for layer
            0 and when they were not asked for.
    """

    layer: int
    states: Tensor
    attention: Tensor | None = None


def check_attention_settings(
    loaded: LoadedModel, mask: Tensor | None, n_tokens: int, temperature: float
) -> None:
    """Fail before any work when a mask or temperature cannot be applied to this model: the
    one validation of a probe's attention mask and temperature (`run_batch` trusts it)."""
    if not 0 < temperature < math.inf:
        raise ConfigError(
            f"temperature must be > 0 and finite, got {temperature}; 1.0 keeps the model's own."
        )
    if (mask is not None or temperature != 1.0) and not loaded.arch.attention_interface:
        with_interface = [a.name for a in ARCHITECTURES.values() if a.attention_interface]
        raise ConfigError(
            f"model '{loaded.name}' ({loaded.arch.name}) does not support masks or temperature: "
            f"{loaded.arch.notes}. Drop {option('mask', None)} and {option('temperature', None)}"
            ", or use a model of "
            f"{', '.join(with_interface)}."
        )
    if mask is not None:
        check_mask(mask, n_tokens)


def n_patch_tokens(config) -> int:
    """Tokens of a ViT: one per image patch plus the [CLS] token."""
    return (config.image_size // config.patch_size) ** 2 + 1


@contextmanager
def modes_kept(model: nn.Module) -> Iterator[None]:
    """Inside this block the model's mode may change; on leaving, every submodule gets its own
    train/eval mode back (a model with some parts frozen in eval stays so)."""
    modes = [(module, module.training) for module in model.modules()]
    try:
        yield
    finally:
        for module, training in modes:
            module.training = training


@contextmanager
def applied(
    loaded: LoadedModel,
    *,
    variant: Variant | str = "transformer",
    mask: Tensor | None = None,
    token_mask: Tensor | None = None,
    temperature: float = 1.0,
    train_mode: bool = False,
    record: Callable | None = None,
    check: bool = True,
) -> Iterator[None]:
    """Inside this block, `loaded.model` runs with the variant, mask, temperature and mode.

    A variant given by name is parsed here; `check` checks it is defined for this family
    (False: the caller checked it once for all its batches). `record(module, probs)` receives
    every attention call's probabilities (custom attention). The model's own attention
    implementation is kept when nothing needs the custom one.
    """
    if not isinstance(variant, Variant):
        variant = parse_variant(variant)
    if check:
        check_variant(variant, loaded.arch)
    model = loaded.model
    custom = loaded.arch.attention_interface and (
        mask is not None or temperature != 1.0 or record is not None
    )
    with ExitStack() as stack:
        stack.enter_context(variant_applied(model, loaded.arch, variant))
        if custom:
            settings = AttentionSettings(mask, token_mask, temperature, record)
            stack.enter_context(attention_settings(model, settings))
        stack.enter_context(modes_kept(model))
        model.train(train_mode)
        yield


@contextmanager
def blocks_captured(
    blocks: Sequence[nn.Module],
    on_layer: Callable[[LayerCapture], None],
    *,
    seq_first: bool = False,
    probs: Callable[[], Tensor | None] = lambda: None,
) -> Iterator[None]:
    """Inside this block, every forward pass through `blocks` (in order) calls `on_layer` with
    layer 0 (the first block's input) and then each block's output, as soon as it exists.

    `blocks` are the modules of any network, run once each per forward pass; a block that
    returns a tuple gives its first element. `seq_first`: states come as (n, b, d) (XLNet).
    `probs()` gives the attention probabilities recorded for the block that just ran. The
    hooks are removed on leaving, also after an error.
    """
    state = {"layer": 0}

    def to_tokens_as_rows(x: Tensor) -> Tensor:
        return x.transpose(0, 1) if seq_first else x

    def before_first_block(module, args, kwargs):
        if state["layer"] == 0:
            x = args[0] if args else kwargs["hidden_states"]
            on_layer(LayerCapture(0, to_tokens_as_rows(x)))

    def after_block(module, args, output):
        state["layer"] += 1
        x = output[0] if isinstance(output, tuple) else output
        on_layer(LayerCapture(state["layer"], to_tokens_as_rows(x), probs()))

    handles = [blocks[0].register_forward_pre_hook(before_first_block, with_kwargs=True)]
    handles += [block.register_forward_hook(after_block) for block in blocks]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def run_batch(
    loaded: LoadedModel,
    input_ids: Tensor,
    token_mask: Tensor | None = None,
    *,
    on_layer: Callable[[LayerCapture], None],
    variant: Variant | str = "transformer",
    mask: Tensor | None = None,
    temperature: float = 1.0,
    train_mode: bool = False,
    attention: bool = False,
    check: bool = True,
) -> None:
    """One forward pass; `on_layer` is called with every layer's state as soon as it exists.

    The model keeps no key-value cache in this pass (`use_cache=False` where its forward takes
    it): nothing here generates, and a decoder's cache holds every layer's keys and values.

    Args:
        loaded: from `load_model` or `wrap_model`.
        input_ids: (b, n) token ids, or (b, channels, height, width) pixel values for a model
            whose adapter takes pixels (ViT); moved to the model's device.
        token_mask: (b, n) bool, True for real tokens (None: all real). Pads are excluded from
            attention by the model (or by the replacement mask) and must be excluded from metrics
            by the callback.
        on_layer: called n_layers + 1 times, in order, with a `LayerCapture`.
        variant: a name of `VARIANTS` or a `Variant`.
        mask: boolean (n, n) attention mask replacing the model's own pattern in every layer.
        temperature: softmax temperature (logits / T on top of the model's scaling).
        train_mode: run with dropout on (the model is put back in its previous mode afterwards).
        attention: also capture each block's attention probabilities.
        check: check the variant, mask and temperature here (`check_variant`,
            `check_attention_settings`); False when the caller checked them once for all its
            batches, as `run_probe` and the monitor do.
    """
    arch, model = loaded.arch, loaded.model
    device = loaded.device
    pixels = arch.inputs == "pixels"
    if token_mask is None:
        shape = (input_ids.shape[0], n_patch_tokens(model.config)) if pixels else input_ids.shape
        token_mask = torch.ones(shape, dtype=torch.bool)
    if check:
        check_attention_settings(loaded, mask, token_mask.shape[-1], temperature)
    input_ids, token_mask = input_ids.to(device), token_mask.to(device)
    if mask is not None:
        mask = mask.to(device)
    blocks = block_list(model, arch)
    with (
        _attention_recorded(arch, blocks, attention) as (take_probs, record),
        blocks_captured(blocks, on_layer, seq_first=arch.seq_first, probs=take_probs),
        applied(
            loaded,
            variant=variant,
            mask=mask,
            token_mask=token_mask,
            temperature=temperature,
            train_mode=train_mode,
            record=record,
            check=check,
        ),
        torch.no_grad(),
    ):
        if pixels:
            model(pixel_values=input_ids.to(loaded.dtype))
        else:
            model(input_ids=input_ids, attention_mask=token_mask.long(), **_without_cache(model))


def _without_cache(model: nn.Module) -> dict[str, bool]:
    """`use_cache=False` for a model whose forward takes it, else nothing.

    A pass here never generates, and a decoder's key-value cache holds every layer's keys and
    values (a copy of each) until the pass ends: SmolLM2's, 47 MB per 1024 tokens, was about a
    third of the probe's peak memory (medians of 6 children, `benchmarks/bench_probe.py`: 176
    MB with it, 110 MB without). The states do not change: probe frames equal with and without.
    """
    takes_it = "use_cache" in inspect.signature(model.forward).parameters
    return {"use_cache": False} if takes_it else {}


@contextmanager
def _attention_recorded(
    arch: Architecture, blocks: Sequence[nn.Module], attention: bool
) -> Iterator[tuple[Callable[[], Tensor | None], Callable | None]]:
    """(the attention probabilities of the block that just ran, or None; the `record` of the
    custom attention function, or None). Without `attention` nothing is recorded; a model
    without the attention interface is hooked where its adapter keeps the probabilities
    (`probs_at`), hooks removed on leaving."""
    state: dict[str, Tensor | None] = {"probs": None}

    def take_probs() -> Tensor | None:
        probs, state["probs"] = state["probs"], None
        return probs

    def record(module, probs):
        state["probs"] = probs

    def record_at(module, args, output):
        if args[0].ndim == 4:  # the dropout also sees the (n, b, d) branch in XLNet
            state["probs"] = args[0] if state["probs"] is None else state["probs"]

    handles = []
    if attention and not arch.attention_interface:
        for block in blocks:
            probs_module = submodule(submodule(block, arch.attention), arch.probs_at)
            handles.append(probs_module.register_forward_hook(record_at))
    try:
        yield take_probs, (record if attention and arch.attention_interface else None)
    finally:
        for handle in handles:
            handle.remove()
