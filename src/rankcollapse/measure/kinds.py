"""The kinds of model the probe, the curves and the monitor measure: one `Measured` interface,
one class per kind, the only place where kinds differ. Everything else (the checked request,
inputs, the one measuring loop `measure.layers.measure_batch`, metrics, rows) is shared.

- `HfMeasured`: a Hugging Face model (`rankcollapse.hf`: adapters, hooks, a registered attention
  function), a `LoadedModel` or a model in memory;
- `HookedMeasured`: a TransformerLens `HookedTransformer` (`lens.run_hooked`, its hook points;
  recognised by class, so with TransformerLens 4, which removed the class, it takes no model);
- `BridgeMeasured`: a TransformerLens `TransformerBridge` (`lens.run_bridge`; 3.9 and 4.x);
- `BlocksMeasured`: any `torch.nn.Module` with declared blocks (the monitor's `blocks=`);
- an nnsight wrapper is measured as the model it wraps, with its tokenizer.

A new kind is one subclass of `Measured` here (or in the user's own code) registered with
`@register_kind`: `accepts(model)` recognises it, `of(model, tokenizer)` wraps it, and the class
answers what the probe asks (name, n_positions, embedding_size, causal, takes_pixels,
check_variants, check_settings, run_layers). `as_measured(model)` picks the kind, after
checking that it is a model that can run (parameters, a real device, blocks).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar, Generic, TypeVar

import torch
from torch import Tensor, nn

from rankcollapse.errors import ConfigError, InputError
from rankcollapse.hf import (
    LayerCapture,
    LoadedModel,
    RunSettings,
    as_loaded,
    blocks_captured,
    check_attention_settings,
    check_variant,
    modes_kept,
    pixel_inputs,
    stream_batch,
)
from rankcollapse.hf.models import Placed, Vocabulary
from rankcollapse.lens import (
    BridgeModel,
    HookedModel,
    as_bridge,
    as_hooked,
    check_bridge_settings,
    check_bridge_variant,
    check_hooked_settings,
    check_hooked_variant,
    is_hooked_transformer,
    is_nnsight,
    is_transformer_bridge,
    stream_bridge,
    stream_hooked,
    unwrap_nnsight,
)
from rankcollapse.variants import Variant

OnLayer = Callable[[LayerCapture], None]

KNOWN = (
    "a Hugging Face model (a config with a model_type), a TransformerLens HookedTransformer or "
    "TransformerBridge, an nnsight wrapper of one"
)


class Measured(Placed):
    """A model as the probe measures it: what it is called, what it takes, what it can run,
    and one forward pass streaming every layer to a callback (`run_layers`).

    Subclasses set `model` (the torch module), `name`, `init`, `tokenizer` and `info`, and
    override what differs from these defaults: no context limit, no token ids known, not
    causal, text, only the variant "transformer", its own attention pattern.
    """

    model: nn.Module
    name: str
    init: str = "in-memory"
    tokenizer: Any = None
    info: dict[str, Any]
    needs_parameters: ClassVar[bool] = True
    """Whether the device and dtype come from the parameters (a model that has none is
    refused with a sentence, `check_parameters`)."""

    @classmethod
    def accepts(cls, model: Any) -> bool:
        """Whether `as_measured` wraps `model` as this kind."""
        return False

    @classmethod
    def of(cls, model: Any, tokenizer: Any = None) -> Measured:
        raise NotImplementedError(f"{cls.__name__} is made by its caller, not by as_measured")

    @property
    def n_layers(self) -> int:
        raise NotImplementedError

    @property
    def n_positions(self) -> int | None:
        """The longest input the model takes (None: no limit known)."""
        return None

    @property
    def embedding_size(self) -> int | None:
        """Rows of the token embedding: every token id must be below (None: not token ids)."""
        return None

    @property
    def causal(self) -> bool:
        """Whether the model's own attention pattern is causal."""
        return False

    @property
    def takes_pixels(self) -> bool:
        return False

    @property
    def has_tokenizer(self) -> bool:
        return self.tokenizer is not None

    @property
    def vocabulary(self) -> Vocabulary:
        """The ids random tokens are drawn from."""
        if self.tokenizer is not None:
            return Vocabulary.of(self.tokenizer)
        if self.embedding_size is None:
            raise InputError(f"'{self.name}' takes no token ids; pass its inputs.")
        return Vocabulary(self.embedding_size, frozenset())

    def pixels(self, **options: Any) -> tuple[Tensor, Tensor]:
        """(pixels, token mask) of a vision model (`takes_pixels`)."""
        raise InputError(f"'{self.name}' takes no pixels.")

    def check_variants(self, variants: Iterable[Variant]) -> None:
        """Fail before any work for a variant the model cannot realise."""
        for variant in variants:
            if variant.name != "transformer":
                raise ConfigError(
                    f"variant '{variant}' is defined for Hugging Face models only (and "
                    f"TransformerLens HookedTransformers); a {type(self.model).__name__} is "
                    "measured as it is (variants=['transformer'])."
                )

    def check_settings(self, settings: RunSettings, n_tokens: int) -> None:
        """Fail before any work when the settings' mask, temperature or attention capture
        cannot be applied to this model."""
        if settings.mask is not None or settings.temperature != 1.0:
            raise ConfigError(
                f"a {type(self.model).__name__} is measured with its own attention: drop "
                "mask/temperature."
            )

    def check_runs(self) -> None:
        """Fail with a sentence for a model without blocks (nothing to measure)."""
        if self.n_layers < 1:
            raise InputError(
                f"the {type(self.model).__name__} '{self.name}' has no blocks (n_layers="
                f"{self.n_layers}), so there are no layers to measure; pass a model with at "
                "least one block."
            )

    def run_layers(
        self, input_ids: Tensor, token_mask: Tensor | None, on_layer: OnLayer, settings: RunSettings
    ) -> None:
        """One forward pass streaming every layer's states (layer 0 = the first block's input)
        and, with `settings.attention`, each block's attention probabilities to `on_layer`."""
        raise NotImplementedError


KINDS: list[type[Measured]] = []
"""The kinds `as_measured` tries, in order (the first that accepts a model wraps it)."""


def register_kind(kind: type[Measured]) -> type[Measured]:
    """Register a kind (a class decorator): `as_measured` tries it before the built-in kinds."""
    KINDS.insert(0, kind)
    return kind


class HfMeasured(Measured):
    """A Hugging Face model: adapters, hooks and a registered attention function (`hf`)."""

    def __init__(self, loaded: LoadedModel) -> None:
        self.loaded = loaded
        self.model, self.name, self.init, self.info = (
            loaded.model,
            loaded.name,
            loaded.init,
            loaded.info,
        )

    @classmethod
    def accepts(cls, model: Any) -> bool:
        if isinstance(model, LoadedModel):
            return True
        return isinstance(model, nn.Module) and hasattr(
            getattr(model, "config", None), "model_type"
        )

    @classmethod
    def of(cls, model: Any, tokenizer: Any = None) -> Measured:
        return cls(as_loaded(model, tokenizer=tokenizer))

    tokenizer = property(lambda self: self.loaded.tokenizer)
    has_tokenizer = property(lambda self: self.loaded.has_tokenizer)
    vocabulary = property(lambda self: self.loaded.vocabulary)
    n_layers = property(lambda self: self.loaded.n_layers)
    causal = property(lambda self: self.loaded.arch.causal)
    takes_pixels = property(lambda self: self.loaded.arch.inputs == "pixels")

    @property
    def n_positions(self) -> int | None:
        limit = getattr(self.model.config, "max_position_embeddings", None)
        return limit if isinstance(limit, int) and limit > 0 else None

    @property
    def embedding_size(self) -> int:
        config: Any = self.model.config
        return int(config.vocab_size)

    def pixels(self, **options: Any) -> tuple[Tensor, Tensor]:
        return pixel_inputs(self.loaded, **options)

    def check_variants(self, variants: Iterable[Variant]) -> None:
        for variant in variants:
            check_variant(variant, self.loaded.arch)

    def check_settings(self, settings: RunSettings, n_tokens: int) -> None:
        check_attention_settings(self.loaded, settings, n_tokens)

    def run_layers(self, input_ids, token_mask, on_layer, settings) -> None:
        stream_batch(self.loaded, input_ids, token_mask, on_layer=on_layer, settings=settings)


Inner = TypeVar("Inner", HookedModel, BridgeModel)


class _Lens(Measured, Generic[Inner]):
    """What a HookedTransformer and a TransformerBridge share: a wrapper (`HookedModel`,
    `BridgeModel`) that knows its sizes."""

    def __init__(self, inner: Inner) -> None:
        self.inner: Inner = inner
        self.model, self.name, self.init, self.info = (
            inner.model,
            inner.name,
            inner.init,
            inner.info,
        )

    tokenizer = property(lambda self: self.inner.tokenizer)
    vocabulary = property(lambda self: self.inner.vocabulary)
    embedding_size = property(lambda self: self.inner.embedding_size)
    n_positions = property(lambda self: self.inner.n_positions)
    causal = property(lambda self: self.inner.causal)

    @property
    def n_layers(self) -> int:
        """The blocks it runs (a config's `n_layers` with no blocks built is none)."""
        return min(len(getattr(self.model, "blocks", None) or []), self.inner.n_layers)


class HookedMeasured(_Lens[HookedModel]):
    """A TransformerLens `HookedTransformer`, through its own hook points (`lens.run_hooked`)."""

    @classmethod
    def accepts(cls, model: Any) -> bool:
        return isinstance(model, HookedModel) or is_hooked_transformer(model)

    @classmethod
    def of(cls, model: Any, tokenizer: Any = None) -> Measured:
        return cls(as_hooked(model, tokenizer=tokenizer))

    def check_variants(self, variants: Iterable[Variant]) -> None:
        for variant in variants:
            check_hooked_variant(variant, self.inner)

    def check_settings(self, settings: RunSettings, n_tokens: int) -> None:
        check_hooked_settings(self.inner, settings, n_tokens)

    def run_layers(self, input_ids, token_mask, on_layer, settings) -> None:
        stream_hooked(self.inner, input_ids, token_mask, on_layer=on_layer, settings=settings)


class BridgeMeasured(_Lens[BridgeModel]):
    """A TransformerLens `TransformerBridge`, through its blocks' hooks (`lens.run_bridge`)."""

    @classmethod
    def accepts(cls, model: Any) -> bool:
        return isinstance(model, BridgeModel) or is_transformer_bridge(model)

    @classmethod
    def of(cls, model: Any, tokenizer: Any = None) -> Measured:
        return cls(as_bridge(model, tokenizer=tokenizer))

    def check_variants(self, variants: Iterable[Variant]) -> None:
        for variant in variants:
            check_bridge_variant(variant, self.inner)

    def check_settings(self, settings: RunSettings, n_tokens: int) -> None:
        check_bridge_settings(self.inner, settings, n_tokens)

    def run_layers(self, input_ids, token_mask, on_layer, settings) -> None:
        stream_bridge(self.inner, input_ids, token_mask, on_layer=on_layer, settings=settings)


class BlocksMeasured(Measured):
    """Any torch module with declared blocks, run once each per forward pass: layer 0 is the
    first block's input, layer l the output of block l (the first element of a tuple). It is
    fed whatever `model(inputs)` takes, measured as it is, states only."""

    needs_parameters = False  # runs where its inputs are

    def __init__(self, model: nn.Module, blocks: Sequence[nn.Module]) -> None:
        self.model, self.blocks, self.name, self.info = (
            model,
            list(blocks),
            type(model).__name__,
            {},
        )

    n_layers = property(lambda self: len(self.blocks))

    @property
    def device(self) -> torch.device:
        """Its parameters' device; a module without parameters runs where its inputs are."""
        param = next(self.model.parameters(), None)
        return torch.device("cpu") if param is None else param.device

    def check_settings(self, settings: RunSettings, n_tokens: int) -> None:
        super().check_settings(settings, n_tokens)
        if settings.attention:
            raise ConfigError(
                "attention metrics are measured on the attention a Hugging Face model's or a "
                "TransformerLens model's hooks capture; a module with declared blocks gives "
                "states only. Drop them, or measure such a model."
            )

    def run_layers(self, input_ids, token_mask, on_layer, settings) -> None:
        param = next(self.model.parameters(), None)
        device = input_ids.device if param is None else param.device
        with blocks_captured(self.blocks, on_layer), modes_kept(self.model), torch.no_grad():
            self.model.train(settings.train_mode)
            self.model(input_ids.to(device))


KINDS += [HookedMeasured, BridgeMeasured, HfMeasured]  # a bridge also has an HF config


def as_measured(model: Any, *, tokenizer: Any = None) -> Measured:
    """`model` as the kind that measures it, never copied (an nnsight wrapper: the model it
    wraps, with the wrapper's tokenizer), checked that it can run; else an InputError saying
    what it is and what is measured."""
    if isinstance(model, Measured):
        return model
    if is_nnsight(model):
        inner, tokenizer = unwrap_nnsight(model, tokenizer)
        if not any(kind.accepts(inner) for kind in KINDS):
            raise InputError(
                f"this nnsight {type(model).__name__} wraps a {type(inner).__name__}, not a model "
                f"the probe knows ({KNOWN}); wrap such a model, or watch(model, blocks=..., "
                "inputs=...) with the module's blocks."
            )
        model = inner
    kind = next((kind for kind in KINDS if kind.accepts(model)), None)
    if kind is None:
        raise InputError(f"{_what(model)} is not a model the probe knows; pass {KNOWN}.")
    wrapped = isinstance(model, (LoadedModel, HookedModel, BridgeModel))
    check_parameters(model.model if wrapped else model, needed=kind.needs_parameters)
    measured = kind.of(model, tokenizer)
    measured.check_runs()
    return measured


def check_parameters(module: nn.Module, *, needed: bool = True) -> None:
    """Fail with a sentence for a module that cannot run: no parameters where the device comes
    from them, parameters on the meta device (shapes without values)."""
    what = f"the {type(module).__name__}"
    params = list(module.parameters())
    if needed and not params:
        raise InputError(
            f"{what} has no parameters, so there is no model to measure (and no device to "
            f"run on); pass a model with its weights: {KNOWN}."
        )
    if any(p.device.type == "meta" for p in params):
        raise InputError(
            f"{what} has its parameters on the meta device (shapes without values), so it "
            "cannot run; load its weights first (from_pretrained without device_map='meta', "
            "or model.to_empty(device='cpu') then load_state_dict)."
        )


def _what(model: Any) -> str:
    """A thing that is not a model, in a few words."""
    if model is None:
        return "None"
    if isinstance(model, type):
        return f"the class {model.__name__} (a class, not a model: build one first)"
    if isinstance(model, nn.Module):
        return (
            f"a {type(model).__name__} (a torch module without a config with a model_type; "
            "watch(model, blocks=..., inputs=...) measures any module with declared blocks)"
        )
    name = type(model).__name__
    article = "an" if name[0].lower() in "aeiou" else "a"
    shown = repr(model)
    return f"{article} {name}" + (f" ({shown})" if len(shown) <= 40 else "")


def is_in_memory(model: Any) -> bool:
    """Whether `model` is something in memory to measure (not a name or directory to load)."""
    return not isinstance(model, (str, bytes)) and not hasattr(model, "__fspath__")
