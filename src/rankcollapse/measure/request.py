"""What a probe, a real model's curve or a monitor measures, checked once before any model loads:
`resolve_probe(variants, mask, metrics, ...)` -> `ProbeRequest`.

Every value becomes its type here, on every route (`rankcollapse probe`, `probe(...)`,
`real_curves`, `watch(...)`): variant names `Variant`s, a mask spec a `MaskSpec` (its (n, n)
mask built once per token count, `ProbeRequest.mask_for`), metric names the registry's
`MetricInfo`s (split by kind), the temperature a float > 0, the batch size within its bound,
the flags bools. A bad value raises a `RankCollapseError` naming it before anything loads or
any folder is claimed. What depends on the model (a variant defined for its family, a mask it
can take) is checked by the model's kind (`measure.kinds`), once, before the first forward pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from torch import Tensor

from rankcollapse.errors import ConfigError
from rankcollapse.hf import RunSettings, check_temperature
from rankcollapse.masks import MaskSpec, as_mask_spec, check_mask
from rankcollapse.metrics import DEFAULT_METRICS, MetricInfo, get_metric
from rankcollapse.sizes import check_size
from rankcollapse.variants import Variant, parse_variant


@dataclass(frozen=True)
class ProbeRequest:
    """What a probe measures, resolved once from names (`resolve_probe`), before any model
    loads."""

    variants: tuple[Variant, ...]
    mask: MaskSpec | Tensor | None
    """A parsed mask spec, a boolean (n, n) tensor, or None: the model's own pattern."""
    metrics: tuple[MetricInfo, ...]
    """The registered metrics, in the order asked: state metrics are measured on the states,
    attention metrics on the attention probabilities (averaged over heads)."""
    temperature: float = 1.0
    """Softmax temperature (logits / T) on top of the model's own scaling."""
    train_mode: bool = False
    """Dropout on."""
    batch_size: int | None = None
    """Samples per forward pass (None: as many as hold `measure.layers.MAX_TOKENS` tokens, on
    an accelerator `DEVICE_MAX_TOKENS`; all at once in train mode)."""
    keep_states: bool = False
    """Also keep every layer's states in `frame.attrs["states"]`."""
    built: dict[int, Tensor] = field(default_factory=dict, compare=False, repr=False)
    """The mask spec's (n, n) mask per token count, built once (`mask_for`)."""

    @property
    def names(self) -> tuple[str, ...]:
        """Every metric's name, in the order asked."""
        return tuple(metric.name for metric in self.metrics)

    @property
    def state_metrics(self) -> tuple[MetricInfo, ...]:
        return tuple(metric for metric in self.metrics if metric.kind == "states")

    @property
    def attention_metrics(self) -> tuple[MetricInfo, ...]:
        return tuple(metric for metric in self.metrics if metric.kind == "attention")

    def mask_for(self, n_tokens: int) -> tuple[Tensor | None, str]:
        """(the boolean (n, n) mask for `n_tokens` tokens, or None: the model's own pattern;
        its label in the rows: the spec, "custom" or "model"). A spec is built once per token
        count; a spec or tensor that does not fit `n_tokens` raises its clear error."""
        if self.mask is None:
            return None, "model"
        if isinstance(self.mask, MaskSpec):
            if n_tokens not in self.built:
                self.built[n_tokens] = self.mask.build(n_tokens)
            return self.built[n_tokens], str(self.mask)
        return check_mask(self.mask, n_tokens), "custom"

    def settings(self, variant: Variant, mask: Tensor | None) -> RunSettings:
        """The settings of one forward pass of `variant` with the (n, n) `mask` (`mask_for`)."""
        return RunSettings(
            variant,
            mask,
            self.temperature,
            self.train_mode,
            attention=bool(self.attention_metrics),
        )


def _names(what: str, names: Any) -> list[Any] | None:
    """A list of names from "a,b" or a list (None stays None), each named once."""
    if names is None:
        return None
    if isinstance(names, str):
        names = [name.strip() for name in names.split(",") if name.strip()]
    try:
        names = list(names)
    except TypeError:
        raise ConfigError(
            f"{what} takes names, as a list or 'a,b', got {names!r}; see `rankcollapse {what}`."
        ) from None
    if not all(isinstance(name, str) for name in names):
        odd = next(name for name in names if not isinstance(name, str))
        raise ConfigError(
            f"{what} takes names (str), got {odd!r} in {names!r}; see `rankcollapse {what}`."
        )
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ConfigError(f"{what} names {twice} more than once; name each once.")
    return names


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{name} takes True or False, got {value!r}.")
    return value


def _mask(mask: Any) -> MaskSpec | Tensor | None:
    """A mask spec parsed ("model": None), a tensor checked square and boolean, or None."""
    if mask is None or isinstance(mask, MaskSpec):
        return mask
    if isinstance(mask, str):
        return None if mask.strip() == "model" else as_mask_spec(mask)
    if isinstance(mask, Tensor):
        return check_mask(mask)
    raise ConfigError(
        f"mask takes a spec such as 'causal' or 'window:1', a boolean (n, n) tensor or None, "
        f"got a {type(mask).__name__}; see `rankcollapse.masks.MASK_FAMILIES`."
    )


def resolve_probe(
    variants: str | Sequence[str | Variant] = ("transformer",),
    mask: str | MaskSpec | Tensor | None = None,
    metrics: str | Sequence[str] | None = None,
    *,
    temperature: float = 1.0,
    train_mode: bool = False,
    batch_size: int | None = None,
    keep_states: bool = False,
) -> ProbeRequest:
    """Resolve a probe's values once: variants ("san,transformer", a list of names or `Variant`
    objects), a mask spec ("window:1"; None or "model": the model's own pattern; or a boolean
    (n, n) tensor), metric names (a list or "a,b"; None: `DEFAULT_METRICS`), the temperature
    (> 0, finite), the batch size and the flags. A bad value raises a clear error ("did you
    mean").

    Example:
        >>> request = resolve_probe("san, transformer", "window:1", ["res_comp_rel"])
        >>> [v.name for v in request.variants], str(request.mask), request.names
        (['san', 'transformer'], 'window:1', ('res_comp_rel',))
    """
    variant_names, metric_names = _names("variants", variants), _names("metrics", metrics)
    resolved = tuple(parse_variant(v) for v in variant_names or ())
    names = list(DEFAULT_METRICS) if metric_names is None else metric_names
    found = tuple(get_metric(name) for name in names)
    if not resolved or not found:
        raise ConfigError(
            f"at least one variant and one metric are needed, got variants={variant_names}, "
            f"metrics={metric_names}; see `rankcollapse variants` and `rankcollapse metrics`."
        )
    if batch_size is not None:
        check_size("batch_size", batch_size)
    return ProbeRequest(
        resolved,
        _mask(mask),
        found,
        temperature=check_temperature(temperature),
        train_mode=_flag("train_mode", train_mode),
        batch_size=batch_size,
        keep_states=_flag("keep_states", keep_states),
    )
