"""The experiment contract and registry.

An experiment is a module in `rankcollapse.experiments` that reads top to bottom:
docstring (paper, figure, claims) -> `Config` (pydantic, extra="forbid") and `PRESETS`
-> `units(config)` -> `run_unit(config, unit)` -> `summarize(config, results)`,
and ends with `register(Experiment(...))`. It never opens a file: the runner stores,
resumes and reports.

- `units(config) -> list[dict]`: independent units of work; each a small JSON-able dict of
  identifying values (e.g. {"model": "minilm", "variant": "san", "seed": 0}).
- `run_unit(config, unit) -> pd.DataFrame`: the tidy rows of one unit: identifying columns
  first, then `metric, value` (and `at_floor` where a dtype floor applies).
- `claims(config, results) -> list[Claim]`: the findings and checks, from the results alone
  (`summarize` reports them), every finding decided by the one rule of
  `rankcollapse.experiments.verdicts`; every finding has hand-made tables where it passes,
  fails and is not tested in `tests/experiments/cases/<module>.py` (see
  `tests/experiments/test_findings.py`).
- `summarize(config, results) -> Summary`: tables, figures and claims, all computed from
  `results` (the concatenation of every unit's rows, in unit order) in the same run.
  The runner passes `results` as read back from `results.csv` (so `rankcollapse report DIR`
  rebuilds the same report without recomputing): plain columns of str, int, float and
  bool; no categoricals, no objects, and "" reads back as NaN.
"""

from __future__ import annotations

import importlib
import sys
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from rankcollapse.errors import ConfigError, did_you_mean, invalid_config, unknown_name
from rankcollapse.experiments.verdicts import (
    Claim,
)
from rankcollapse.presets import DEFAULT_PRESET, PRESET_NAMES, PRESETS
from rankcollapse.sizes import SIZES, Size

if TYPE_CHECKING:
    import pandas as pd

Unit = dict[str, Any]
TOY_SIZES = ("n_layers", "n_heads", "d_model", "n_tokens", "n_samples")


def toy_sizes(**defaults: int) -> type[BaseModel]:
    """A config base holding the sizes named in `defaults`, each with its range and docstring.

    The sizes are those of `rankcollapse.sizes.SIZES` (n_layers, n_heads, d_model, n_tokens,
    n_samples), with the one bound each has wherever it enters; the values given are the
    experiment's defaults. A config subclasses the result (`# type: ignore[misc]`: mypy does
    not follow a base class built at run time).

    Example:
        >>> class Cfg(toy_sizes(n_layers=4, d_model=8)):
        ...     seeds: list[int] = [0]
        >>> Cfg().n_layers, list(Cfg.model_fields)
        (4, ['n_layers', 'd_model', 'seeds'])
        >>> Cfg.model_fields["d_model"].description
        'Token width.'
    """
    unknown = set(defaults) - set(TOY_SIZES)
    if unknown:
        raise TypeError(f"toy_sizes got {sorted(unknown)}; sizes are {', '.join(TOY_SIZES)}")
    fields: dict[str, Any] = {}
    for name, value in defaults.items():
        fields[name] = (Annotated[int, Size(name)], Field(value, description=SIZES[name].doc))
    sizes = create_model("ToySizes", __config__=ConfigDict(extra="forbid"), **fields)
    # Its subclass's own fields take their docstrings; this model's fields have theirs, and
    # pydantic would search the caller's source for a class statement that is not there (a
    # tenth of a fully stored run's time).
    sizes.model_config["use_attribute_docstrings"] = True
    return sizes


@dataclass
class Summary:
    """What an experiment concludes from its results: named tables, figures and claims."""

    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)  # name -> matplotlib Figure
    claims: list[Claim] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def findings(self) -> list[Claim]:
        """The papers' statements tested (not the project's own, not the checks)."""
        return [c for c in self.claims if c.kind == "finding"]

    @property
    def beyond(self) -> list[Claim]:
        """The project's own conjectures and extensions, tested like findings, listed apart."""
        return [c for c in self.claims if c.kind == "beyond"]

    @property
    def checks(self) -> list[Claim]:
        return [c for c in self.claims if c.kind == "check"]


@dataclass(frozen=True)
class Experiment:
    """A named, reproducible experiment (see the module docstring for the contract)."""

    name: str
    description: str
    config: type[BaseModel]
    presets: Mapping[str, Mapping[str, Any]]
    # Any: each takes the experiment's own Config (a BaseModel), not every BaseModel
    units: Callable[[Any], list[Unit]]
    run_unit: Callable[[Any, Unit], pd.DataFrame]
    summarize: Callable[[Any, pd.DataFrame], Summary]
    claims: Callable[[Any, pd.DataFrame], list[Claim]] | None = None
    """The findings and checks alone, from the results (what `summarize` reports); the
    registry-wide test runs it on hand-made tables where each finding passes and fails."""

    def make_config(
        self,
        preset: str | None = DEFAULT_PRESET,
        *values: Mapping[str, Any],
        devices_here: bool = False,
    ) -> BaseModel:
        """The one resolution of a config, wherever its values come from: `values` (a config
        file's mapping, `--set` overrides, a Python dict, a stored run's config.yaml) merged in
        order over the preset (None: the config's defaults, for a stored run), key by key;
        nested ({"net": {"n_layers": 4}}) or dotted ({"net.n_layers": 4}) keys alike. Unknown
        keys at any depth are named with the allowed keys, then pydantic checks the values; with
        `devices_here`, every device the config names must be visible on this machine (a run
        that starts here; a stored config names the device it ran on).

        Example:
            >>> from pydantic import ConfigDict
            >>> class Cfg(BaseModel):
            ...     model_config = ConfigDict(extra="forbid")
            ...     n_layers: int = 2
            >>> exp = Experiment("demo", "d", Cfg, {"quick": {}, "paper": {"n_layers": 12}},
            ...                  lambda c: [], lambda c, u: None, lambda c, r: Summary())
            >>> exp.make_config("paper", {"n_layers": 3}).n_layers
            3
            >>> exp.make_config("quick", {"n_layer": 3})
            Traceback (most recent call last):
            ...
            rankcollapse.errors.ConfigError: demo has no config key 'n_layer'. Did you mean 'n_layers'? Keys: n_layers.
        """
        if preset is not None and preset not in self.presets:
            raise unknown_name(f"preset of {self.name}", preset, self.presets)
        merged = merge_values(self.presets[preset] if preset else {}, merged_values(*values))
        _check_keys(self.name, self.config, merged, prefix="")
        try:
            config = self.config(**merged)
        except ValidationError as err:
            raise invalid_config(f"config for {self.name}", err, self.config.model_fields) from None
        if devices_here:
            _check_devices_visible(self.name, config)
        return config


def merged_values(*values: Mapping[str, Any]) -> dict[str, Any]:
    """Several mappings of config values (nested or dotted keys) merged in order.

    Example:
        >>> merged_values({"net.n_layers": 4, "seeds": [0]}, {"net": {"d_model": 8}})
        {'net': {'n_layers': 4, 'd_model': 8}, 'seeds': [0]}
    """
    merged: dict[str, Any] = {}
    for layer in values:
        merged = merge_values(merged, nest_dotted(layer))
    return merged


def _check_devices_visible(name: str, config: BaseModel, prefix: str = "") -> None:
    """Every `torch.device` of `config` (nested configs too) visible here, or a ConfigError
    naming its key. Without torch loaded the config holds no device (parsing one loads
    torch): nothing to check, and torch stays unloaded (a fully stored run needs none)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    from rankcollapse.devices import check_visible

    for key, value in config:
        if isinstance(value, torch.device):  # parsed by the config's `Device` field
            try:
                check_visible(value)
            except ConfigError as err:
                raise ConfigError(f"{name}: {prefix}{key}: {err}") from None
        elif isinstance(value, BaseModel):
            _check_devices_visible(name, value, f"{prefix}{key}.")


def nest_dotted(values: Mapping[str, Any]) -> dict[str, Any]:
    """{"net.n_layers": 4} -> {"net": {"n_layers": 4}}; nested dicts are kept as they are.

    Example:
        >>> nest_dotted({"net.n_layers": 4, "seeds": [0, 1]})
        {'net': {'n_layers': 4}, 'seeds': [0, 1]}
    """
    nested: dict[str, Any] = {}
    for key, value in values.items():
        *parents, leaf = str(key).split(".")
        target = nested
        for part in parents:
            target = target.setdefault(part, {})
        target[leaf] = (
            merge_values(target.get(leaf, {}), value) if isinstance(value, Mapping) else value
        )
    return nested


def merge_values(base: Any, update: Any) -> Any:
    """`update` over `base`, recursing into mappings (lists and scalars are replaced whole).

    A pydantic model in `base` (e.g. a preset holding a sub-config) is merged as its fields.
    """
    if isinstance(base, BaseModel) and isinstance(update, Mapping):
        base = base.model_dump()
    if not (isinstance(base, Mapping) and isinstance(update, Mapping)):
        return update
    merged = dict(base)
    for key, value in update.items():
        merged[key] = merge_values(base[key], value) if key in base else value
    return merged


def _submodel(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside a field annotation (`Sub`, `Sub | None`), if there is one."""
    candidates = (annotation, *typing.get_args(annotation))
    return next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)


def _check_keys(name: str, model: type[BaseModel], values: Mapping[str, Any], prefix: str) -> None:
    fields = model.model_fields
    for key, value in values.items():
        if key not in fields:
            allowed = [prefix + f for f in fields]
            raise ConfigError(
                f"{name} has no config key '{prefix}{key}'."
                f"{did_you_mean(prefix + str(key), allowed)} Keys: {', '.join(allowed)}."
            )
        sub = _submodel(fields[key].annotation)
        if sub is not None and isinstance(value, Mapping):
            _check_keys(name, sub, value, prefix=f"{prefix}{key}.")


_REGISTRY: dict[str, Experiment | str] = {}  # name -> experiment, or the module that registers it
_IMPORTED: dict[str, Experiment] = {}  # every experiment a module registered, for `get_experiment`


def declare(name: str, module: str) -> None:
    """Name an experiment that `module` registers when imported; it is imported on first use
    (`get_experiment`), so a worker running one experiment imports that module alone."""
    _REGISTRY.setdefault(name, module)


def register(exp: Experiment) -> Experiment:
    """Add an experiment to the registry (called once, at the bottom of its module)."""
    if isinstance(_REGISTRY.get(exp.name), Experiment):  # a declared name (a str) registers once
        raise RuntimeError(f"experiment {exp.name!r} registered twice")  # noqa: TRY004
    for required in PRESETS:
        if required not in exp.presets:
            raise RuntimeError(f"experiment {exp.name!r} lacks the {required!r} preset")
    for declared in exp.presets:
        if declared not in PRESET_NAMES:  # the command line could not ask for it
            raise RuntimeError(
                f"experiment {exp.name!r} declares the preset {declared!r}, not one of "
                f"{PRESET_NAMES} (rankcollapse.presets)"
            )
    _REGISTRY[exp.name] = _IMPORTED[exp.name] = exp
    return exp


def get_experiment(name: str) -> Experiment:
    """The registered experiment called `name` (its module imported now if it was only
    declared), or an error listing the known ones."""
    if name not in _REGISTRY:
        raise unknown_name("experiment", name, sorted(_REGISTRY))
    entry = _REGISTRY[name]
    if isinstance(entry, str):
        importlib.import_module(entry)
        if name not in _IMPORTED:
            raise RuntimeError(f"module {entry} does not register the experiment {name!r}")
        entry = _REGISTRY[name] = _IMPORTED[name]
    return entry


def experiment_names() -> list[str]:
    """Every registered or declared experiment, sorted (nothing is imported)."""
    return sorted(_REGISTRY)
