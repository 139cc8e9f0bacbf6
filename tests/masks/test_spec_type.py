"""A `MaskSpec` is parsed once and is its canonical string: configs, units, results and hashes
keep strings, code below takes the type and never parses again."""

import importlib
import json
import pickle

import pytest
import torch
from pydantic import BaseModel

from rankcollapse.errors import ConfigError
from rankcollapse.masks import MaskSpec, as_mask_spec, parse_mask_spec, window
from rankcollapse.nets import NetConfig, ToyNet, random_tokens


def test_a_spec_is_its_canonical_string_in_comparisons_hashes_and_json():
    spec = parse_mask_spec("window:01")
    assert spec == "window:1" and hash(spec) == hash("window:1") and str(spec) == "window:1"
    assert "window:1" in [spec] and {spec: 1}["window:1"] == 1
    assert json.dumps({"mask": spec}) == '{"mask": "window:1"}'
    assert (spec.family, spec.params) == ("window", (1,))


def test_a_spec_survives_pickling_without_a_parse(monkeypatch):
    spec = parse_mask_spec("random:0.25:3")
    monkeypatch.setattr(importlib.import_module("rankcollapse.masks.spec"), "parse_mask_spec", None)
    copy = pickle.loads(pickle.dumps(spec))
    assert copy == spec and copy.params == (0.25, 3) and copy.build(5).equal(spec.build(5))


def test_a_pydantic_field_parses_once_and_dumps_the_string():
    class Config(BaseModel):
        masks: list[MaskSpec]

    config = Config(masks=["window:01", parse_mask_spec("causal")])
    assert [type(m) for m in config.masks] == [MaskSpec, MaskSpec]
    assert config.model_dump() == {"masks": ["window:1", "causal"]}
    assert type(config.model_dump()["masks"][0]) is str  # YAML's safe dumper needs plain str
    with pytest.raises(ValueError, match="unknown mask family 'windw'"):
        Config(masks=["windw:1"])


def test_as_mask_spec_passes_a_spec_through_and_parses_a_string():
    spec = parse_mask_spec("causal")
    assert as_mask_spec(spec) is spec
    with pytest.raises(ConfigError, match="takes 1 parameter"):
        as_mask_spec("window")


def test_the_toy_network_builds_its_mask_without_parsing_on_a_forward(monkeypatch):
    net = ToyNet(NetConfig(n_layers=2, d_model=4, mask="window:1"))
    assert net.config.mask == MaskSpec("window", (1,))

    def no_parse(spec):
        raise AssertionError(f"parsed {spec!r} again")

    monkeypatch.setattr(
        importlib.import_module("rankcollapse.masks.spec"), "parse_mask_spec", no_parse
    )
    probs = net(random_tokens(1, 5, 4, seed=0), return_attention=True).attention[0][0, 0]
    assert torch.equal(probs > 0, window(5, 1))
