"""The experiment contract: checks every registered experiment gets for free, the registry
round trip, and config errors that name the key and the allowed values."""

from __future__ import annotations

import json
from typing import Literal

import pandas as pd
import pytest
import yaml
from pydantic import BaseModel, ConfigDict, Field

from rankcollapse.errors import ConfigError, UnknownNameError
from rankcollapse.experiments import (
    Experiment,
    Summary,
    _registry,
    experiment_names,
    get_experiment,
)
from rankcollapse.presets import PRESET_NAMES, PRESETS


@pytest.mark.parametrize("name", experiment_names())
def test_every_experiment_has_a_one_line_description(name):
    description = get_experiment(name).description
    assert description.strip() and "\n" not in description and len(description) <= 150


EVERY_PRESET = [
    (name, preset) for name in experiment_names() for preset in get_experiment(name).presets
]


@pytest.mark.parametrize(("name", "preset"), EVERY_PRESET)
def test_every_experiment_presets_validate_and_give_distinct_json_units(name, preset):
    exp = get_experiment(name)
    config = exp.make_config(preset)
    units = exp.units(config)
    assert units, f"{name} {preset} has no units"
    texts = [json.dumps(unit, sort_keys=True) for unit in units]  # JSON-able
    assert len(set(texts)) == len(texts)


@pytest.mark.parametrize("name", experiment_names())
def test_every_experiment_config_round_trips_through_yaml(name):
    exp = get_experiment(name)
    config = exp.make_config("quick")
    text = yaml.safe_dump(config.model_dump(mode="json"))
    assert exp.config.model_validate(yaml.safe_load(text)) == config


@pytest.mark.parametrize("name", experiment_names())
def test_every_experiment_rejects_an_unknown_config_key_by_name(name):
    exp = get_experiment(name)
    assert exp.config.model_config.get("extra") == "forbid"
    with pytest.raises(ConfigError, match=rf"{name} has no config key 'no_such_key'.*Keys: "):
        exp.make_config("quick", {"no_such_key": 1})


@pytest.mark.parametrize("name", experiment_names())
def test_every_experiment_function_lives_in_a_module_so_workers_can_import_it(name):
    exp = get_experiment(name)
    for fn in (exp.units, exp.run_unit, exp.summarize):
        assert fn.__module__.startswith("rankcollapse.experiments."), fn
        assert "<lambda>" not in fn.__qualname__ and "<locals>" not in fn.__qualname__


# A private experiment for the registry round trip; never added to the real registry.


class Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    depth: int = Field(2, ge=1, le=16)
    norm: Literal["none", "pre", "post"] = "none"


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid")
    variants: list[Literal["san", "skip"]] = ["san", "skip"]
    seeds: list[int] = [0]
    net: Inner = Inner()
    extra_net: Inner | None = None


def make(name: str = "demo", presets=None) -> Experiment:
    return Experiment(
        name=name,
        description="demo",
        config=Config,
        presets=presets or {"quick": {}, "paper": {"seeds": [0, 1, 2], "net": {"depth": 12}}},
        units=lambda c: [{"variant": v, "seed": s} for v in c.variants for s in c.seeds],
        run_unit=lambda c, u: pd.DataFrame(),
        summarize=lambda c, r: Summary(),
    )


@pytest.fixture
def registry(monkeypatch):
    private: dict[str, Experiment] = {}
    monkeypatch.setattr(_registry, "_REGISTRY", private)
    return private


def test_registered_experiment_is_found_by_name_and_listed(registry):
    exp = _registry.register(make())
    assert _registry.get_experiment("demo") is exp
    assert _registry.experiment_names() == ["demo"]


def test_unknown_experiment_error_lists_known_and_suggests(registry):
    _registry.register(make())
    with pytest.raises(UnknownNameError, match=r"unknown experiment 'dmeo'. Known: demo.*'demo'"):
        _registry.get_experiment("dmeo")


def test_registering_twice_or_without_paper_preset_is_refused(registry):
    _registry.register(make())
    with pytest.raises(RuntimeError, match="registered twice"):
        _registry.register(make())
    with pytest.raises(RuntimeError, match="lacks the 'paper' preset"):
        _registry.register(make("other", presets={"quick": {}}))


def test_preset_is_merged_key_by_key_under_nested_overrides():
    exp = make()
    config = exp.make_config("paper", {"net": {"norm": "post"}})
    assert config.net == Inner(depth=12, norm="post")
    assert exp.make_config("paper", {"net.norm": "pre"}).net == Inner(depth=12, norm="pre")
    assert exp.make_config("paper").seeds == [0, 1, 2]


def test_unknown_preset_lists_the_presets():
    with pytest.raises(UnknownNameError, match=r"unknown preset of demo 'papre'.*quick, paper"):
        make().make_config("papre")


def test_a_nested_typo_names_the_full_key_and_the_allowed_nested_keys():
    with pytest.raises(
        ConfigError, match=r"'net.dpeth'. Did you mean 'net.depth'\? Keys: net.depth, net.norm"
    ):
        make().make_config("quick", {"net.dpeth": 3})
    with pytest.raises(ConfigError, match=r"'extra_net.nrom'.*Keys: extra_net.depth"):
        make().make_config("quick", {"extra_net": {"nrom": "pre"}})


def test_an_out_of_range_value_names_the_key_the_limit_and_the_value():
    with pytest.raises(ConfigError, match=r"net.depth: .*less than or equal to 16 \(got 40\)"):
        make().make_config("quick", {"net.depth": 40})


def test_a_bad_choice_names_the_allowed_values():
    with pytest.raises(
        ConfigError, match=r"variants.1: Input should be 'san' or 'skip' \(got 'skp'\)"
    ):
        make().make_config("quick", {"variants": ["san", "skp"]})


def test_a_preset_holding_a_sub_config_object_is_merged_field_by_field():
    exp = make(presets={"quick": {"net": Inner(depth=5, norm="pre")}, "paper": {}})
    assert exp.make_config("quick", {"net.norm": "post"}).net == Inner(depth=5, norm="post")


@pytest.mark.parametrize("name", experiment_names())
def test_every_experiment_has_the_common_presets_and_only_names_the_command_line_accepts(name):
    presets = set(get_experiment(name).presets)
    assert set(PRESETS) <= presets <= set(PRESET_NAMES)


def test_a_preset_the_command_line_cannot_name_is_refused_at_registration():
    exp = get_experiment("toy-collapse")
    odd = Experiment(
        "odd-presets",
        "d",
        exp.config,
        {**exp.presets, "laptop": {}},
        exp.units,
        exp.run_unit,
        exp.summarize,
    )
    with pytest.raises(RuntimeError, match="declares the preset 'laptop'"):
        _registry.register(odd)
