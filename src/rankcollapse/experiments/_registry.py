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
- `summarize(config, results) -> Summary`: tables, figures and claims, all computed from
  `results` (the concatenation of every unit's rows, in unit order) in the same run.
  The runner passes `results` as read back from `results.csv` (so `rankcollapse report DIR`
  rebuilds the same report without recomputing): plain columns of str, int, float and
  bool; no categoricals, no objects, and "" reads back as NaN.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd
from pydantic import BaseModel, ValidationError

from rankcollapse.errors import ConfigError, did_you_mean, unknown_name

Unit = dict[str, Any]
Relation = Literal["<", "<=", ">", ">=", "true"]


@dataclass(frozen=True)
class Claim:
    """A finding of a paper, tested on this run's measurements.

    `measured` is the number (or small dict of numbers) computed from the results;
    `passed` compares it with `threshold` by `relation` ("true": `measured` is a bool).
    """

    id: str
    text: str
    quantity: str
    relation: Relation
    threshold: float | None
    measured: Any
    passed: bool
    note: str = ""

    @classmethod
    def check(
        cls,
        id: str,
        text: str,
        quantity: str,
        measured: Any,
        relation: Relation,
        threshold: float | None = None,
        note: str = "",
    ) -> Claim:
        """Build a claim and decide pass/fail from the measured value.

        Example:
            >>> Claim.check("c1", "residual shrinks", "ratio", 0.2, "<", 0.5).passed
            True
        """
        value = float(measured) if relation != "true" else bool(measured)
        if relation == "true":
            passed = bool(value)
        elif value is None or (isinstance(value, float) and math.isnan(value)):
            passed = False
        else:
            passed = {
                "<": value < threshold,
                "<=": value <= threshold,
                ">": value > threshold,
                ">=": value >= threshold,
            }[relation]
        return cls(id, text, quantity, relation, threshold, value, bool(passed), note)

    @property
    def expected(self) -> str:
        return "true" if self.relation == "true" else f"{self.relation} {self.threshold:g}"


@dataclass
class Summary:
    """What an experiment concludes from its results: named tables, figures and claims."""

    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)  # name -> matplotlib Figure
    claims: list[Claim] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Experiment:
    """A named, reproducible experiment (see the module docstring for the contract)."""

    name: str
    description: str
    config: type[BaseModel]
    presets: Mapping[str, Mapping[str, Any]]
    units: Callable[[BaseModel], list[Unit]]
    run_unit: Callable[[BaseModel, Unit], pd.DataFrame]
    summarize: Callable[[BaseModel, pd.DataFrame], Summary]

    def make_config(
        self, preset: str = "quick", overrides: Mapping[str, Any] | None = None
    ) -> BaseModel:
        """Validate a preset plus overrides; a typo or out-of-range value raises ConfigError.

        `overrides` may be nested ({"net": {"depth": 4}}) or use dotted keys ({"net.depth": 4});
        they are merged key by key over the preset. Unknown keys at any depth are named
        together with the allowed keys before pydantic sees the values.

        Example:
            >>> from pydantic import ConfigDict
            >>> class Cfg(BaseModel):
            ...     model_config = ConfigDict(extra="forbid")
            ...     depth: int = 2
            >>> exp = Experiment("demo", "d", Cfg, {"quick": {}, "paper": {"depth": 12}},
            ...                  lambda c: [], lambda c, u: None, lambda c, r: Summary())
            >>> exp.make_config("paper", {"depth": 3}).depth
            3
            >>> exp.make_config(overrides={"depht": 3})
            Traceback (most recent call last):
            ...
            rankcollapse.errors.ConfigError: demo has no config key 'depht'. Did you mean 'depth'? Keys: depth.
        """
        if preset not in self.presets:
            raise unknown_name(f"preset of {self.name}", preset, self.presets)
        values = merge_values(self.presets[preset], nest_dotted(overrides or {}))
        _check_keys(self.name, self.config, values, prefix="")
        try:
            return self.config(**values)
        except ValidationError as err:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'config'}: {e['msg']} (got {e.get('input')!r})"
                for e in err.errors()
            )
            raise ConfigError(f"invalid config for {self.name}: {problems}") from None


def nest_dotted(values: Mapping[str, Any]) -> dict[str, Any]:
    """{"net.depth": 4} -> {"net": {"depth": 4}}; nested dicts are kept as they are.

    Example:
        >>> nest_dotted({"net.depth": 4, "seeds": [0, 1]})
        {'net': {'depth': 4}, 'seeds': [0, 1]}
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
            allowed = ", ".join(prefix + f for f in fields)
            raise ConfigError(
                f"{name} has no config key '{prefix}{key}'."
                f"{did_you_mean(str(key), fields)} Keys: {allowed}."
            )
        sub = _submodel(fields[key].annotation)
        if sub is not None and isinstance(value, Mapping):
            _check_keys(name, sub, value, prefix=f"{prefix}{key}.")


_REGISTRY: dict[str, Experiment] = {}


def register(exp: Experiment) -> Experiment:
    """Add an experiment to the registry (called once, at the bottom of its module)."""
    if exp.name in _REGISTRY:
        raise RuntimeError(f"experiment {exp.name!r} registered twice")
    for required in ("quick", "paper"):
        if required not in exp.presets:
            raise RuntimeError(f"experiment {exp.name!r} lacks the {required!r} preset")
    _REGISTRY[exp.name] = exp
    return exp


def get_experiment(name: str) -> Experiment:
    """The registered experiment called `name`, or an error listing the known ones."""
    if name not in _REGISTRY:
        raise unknown_name("experiment", name, sorted(_REGISTRY))
    return _REGISTRY[name]


def experiment_names() -> list[str]:
    return sorted(_REGISTRY)
