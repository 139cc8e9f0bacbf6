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
from dataclasses import dataclass, field, replace

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


def check_temperature(temperature: object) -> float:
    """The softmax temperature as a float: a real number > 0 and finite, else a ConfigError (the
    one check of a temperature, wherever it enters)."""
    if (
        isinstance(temperature, bool)
        or not isinstance(temperature, (int, float))
        or not 0 < temperature < math.inf
    ):
        raise ConfigError(
            f"temperature must be > 0 and finite (a number), got {temperature!r}; 1.0 keeps the "
            "model's own."
        )
    return float(temperature)


@dataclass(frozen=True)
class RunSettings:
    """How one forward pass of a real model runs: what `run_batch` and `lens.run_hooked` take.

    A variant given by name is parsed, and the temperature checked, when the settings are made;
    what depends on the model (the variant defined for its family, a mask of its context, an
    attention that takes masks) is checked by the run.
    """

    variant: Variant = field(default_factory=lambda: parse_variant("transformer"))
    """A name of `VARIANTS` or a `Variant`."""
    mask: Tensor | None = None
    """A boolean (n, n) attention mask replacing the model's own pattern in every layer."""
    temperature: float = 1.0
    """Softmax temperature (logits / T on top of the model's own scaling)."""
    train_mode: bool = False
    """Run with dropout on (the model is put back in its previous mode afterwards)."""
    attention: bool = False
    """Also capture each block's attention probabilities."""

    def __post_init__(self) -> None:
        if not isinstance(self.variant, Variant):
            object.__setattr__(self, "variant", parse_variant(self.variant))
        object.__setattr__(self, "temperature", check_temperature(self.temperature))


def check_attention_settings(loaded: LoadedModel, settings: RunSettings, n_tokens: int) -> None:
    """Fail before any work when the settings' mask or temperature cannot be applied to this
    model: the one validation of a probe's attention mask against a model."""
    mask, temperature = settings.mask, settings.temperature
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
    settings: RunSettings,
    *,
    token_mask: Tensor | None = None,
    record: Callable | None = None,
) -> Iterator[None]:
    """Inside this block, `loaded.model` runs with the settings' variant, mask, temperature and
    mode (settings checked by `check_run`).

    `record(module, probs)` receives every attention call's probabilities (custom attention).
    The model's own attention implementation is kept when nothing needs the custom one.
    """
    model, mask, temperature = loaded.model, settings.mask, settings.temperature
    custom = loaded.arch.attention_interface and (
        mask is not None or temperature != 1.0 or record is not None
    )
    with ExitStack() as stack:
        stack.enter_context(variant_applied(model, loaded.arch, settings.variant))
        if custom:
            attention = AttentionSettings(mask, token_mask, temperature, record)
            stack.enter_context(attention_settings(model, attention))
        stack.enter_context(modes_kept(model))
        model.train(settings.train_mode)
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


def check_run(loaded: LoadedModel, settings: RunSettings, n_tokens: int) -> None:
    """Fail before any work when the settings cannot be applied to this model: the variant
    defined for its family (`check_variant`), the mask and temperature
    (`check_attention_settings`). `run_batch` calls it; a caller of `stream_batch` calls it
    once for all its batches."""
    check_variant(settings.variant, loaded.arch)
    check_attention_settings(loaded, settings, n_tokens)


def run_batch(
    loaded: LoadedModel,
    input_ids: Tensor,
    token_mask: Tensor | None = None,
    *,
    on_layer: Callable[[LayerCapture], None],
    settings: RunSettings | None = None,
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
        settings: the variant, mask, temperature, mode and whether attention is captured,
            checked against this model here (`check_run`); None: the model as it is, in eval
            mode.
    """
    settings = settings or RunSettings()
    token_mask = _token_mask(loaded, input_ids, token_mask)
    check_run(loaded, settings, token_mask.shape[-1])
    stream_batch(loaded, input_ids, token_mask, on_layer=on_layer, settings=settings)


def _token_mask(loaded: LoadedModel, input_ids: Tensor, token_mask: Tensor | None) -> Tensor:
    """`token_mask`, or all real: (b, n) of the ids, (b, patches + 1) of pixels."""
    if token_mask is not None:
        return token_mask
    if loaded.arch.inputs == "pixels":
        return torch.ones(input_ids.shape[0], n_patch_tokens(loaded.model.config), dtype=torch.bool)
    return torch.ones(input_ids.shape, dtype=torch.bool)


def stream_batch(
    loaded: LoadedModel,
    input_ids: Tensor,
    token_mask: Tensor | None,
    *,
    on_layer: Callable[[LayerCapture], None],
    settings: RunSettings,
) -> None:
    """`run_batch` with settings its caller checked once for all its batches (`check_run`):
    the probe's passes (`measure.kinds`)."""
    arch, model = loaded.arch, loaded.model
    device = loaded.device
    token_mask = _token_mask(loaded, input_ids, token_mask).to(device)
    input_ids = input_ids.to(device)
    if settings.mask is not None:
        settings = replace(settings, mask=settings.mask.to(device))
    blocks = block_list(model, arch)
    with (
        _attention_recorded(arch, blocks, settings.attention) as (take_probs, record),
        blocks_captured(blocks, on_layer, seq_first=arch.seq_first, probs=take_probs),
        applied(loaded, settings, token_mask=token_mask, record=record),
        torch.no_grad(),
    ):
        if arch.inputs == "pixels":
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
    probs_at = arch.probs_at
    if attention and not arch.attention_interface and probs_at is not None:
        for block in blocks:  # every adapter without the interface names its probs_at
            probs_module = submodule(submodule(block, arch.attention), probs_at)
            handles.append(probs_module.register_forward_hook(record_at))
    try:
        yield take_probs, (record if attention and arch.attention_interface else None)
    finally:
        for handle in handles:
            handle.remove()
