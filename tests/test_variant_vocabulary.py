"""The variant vocabulary: a name parsed once into a `Variant` that is its name, config fields
that dump the name they were given, one table for toy and real models."""

import pickle
import subprocess
import sys

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from rankcollapse.errors import UnknownNameError
from rankcollapse.nets import TOY_VARIANTS
from rankcollapse.report import config_hash
from rankcollapse.variants import (
    AUTHORS_VARIANTS,
    DONG_VARIANTS,
    VARIANTS,
    WU_VARIANTS,
    Variant,
    parse_variant,
    variant_type,
)


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid")

    any: list[Variant] = []
    wu: list[variant_type("wu", short=True)] = []
    dong: list[variant_type("dong", "dong-authors")] = []


def test_a_variant_is_its_name_and_holds_its_parts():
    v = parse_variant("wu:san+ln")
    assert v == "wu:san+ln" and str(v) == v.name == "wu:san+ln" and v.short == "san+ln"
    assert (v.family, v.attention_skip, v.mlp, v.norms) == ("wu", False, False, True)
    assert parse_variant(v) is v is VARIANTS["wu:san+ln"]
    assert parse_variant("dong:san") is VARIANTS["san"]


def test_a_variant_survives_pickling_with_its_parts():
    v = pickle.loads(pickle.dumps(VARIANTS["dong-authors:san+mlp"]))
    assert type(v) is Variant and v == "dong-authors:san+mlp"
    assert (v.family, v.attention_skip, v.mlp, v.norms) == ("dong-authors", False, True, True)


def test_the_sets_are_one_table():
    assert list(VARIANTS.values()) == DONG_VARIANTS + WU_VARIANTS + AUTHORS_VARIANTS
    assert [v.short for v in AUTHORS_VARIANTS] == [v.short for v in DONG_VARIANTS]
    assert [v for v in VARIANTS.values() if v.is_identity] == [
        "transformer",
        "wu:transformer",
        "dong-authors:transformer",
    ]


def test_the_toy_network_realises_every_dong_and_wu_name():
    assert set(DONG_VARIANTS + WU_VARIANTS) <= set(TOY_VARIANTS)


def test_config_fields_hold_variants_and_dump_the_names_they_were_given():
    config = Config(any=["san"], wu=["san+ln", "wu:san"], dong=["dong-authors:san"])
    assert config.wu == [VARIANTS["wu:san+ln"], VARIANTS["wu:san"]]
    assert all(isinstance(v, Variant) for v in config.any + config.wu + config.dong)
    dumped = config.model_dump(mode="json")
    assert dumped == {"any": ["san"], "wu": ["san+ln", "san"], "dong": ["dong-authors:san"]}
    assert Config.model_validate(dumped) == config


def test_a_wu_field_hashes_alike_given_short_or_full_names():
    assert config_hash("x", Config(wu=["wu:san+ln"])) == config_hash("x", Config(wu=["san+ln"]))


def test_unknown_or_out_of_set_names_fail_with_the_set_listed():
    with pytest.raises(
        UnknownNameError, match="unknown variant 'san\\+mpl'.*Did you mean 'san\\+mlp'"
    ):
        parse_variant("san+mpl")
    with pytest.raises(ValidationError, match="unknown wu variant 'san\\+mlp'. Known: san, san"):
        Config(wu=["san+mlp"])
    with pytest.raises(ValidationError, match="dong or dong-authors variant 'wu:san'"):
        Config(dong=["wu:san"])


def test_the_vocabulary_imports_neither_torch_nor_pydantic():
    program = (
        "import sys, rankcollapse.variants; "
        "print(sorted({'torch', 'pydantic', 'transformers'} & set(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]", done.stderr


def test_the_toy_table_and_the_vocabulary_agree_on_skip_and_mlp_for_every_shared_name():
    from rankcollapse.nets import NetConfig

    shared = [name for name in TOY_VARIANTS if name in VARIANTS]
    assert len(shared) == len(TOY_VARIANTS) - 1  # every name but the toy-only san+ln
    for name in shared:
        config, v = NetConfig(**TOY_VARIANTS[name]), VARIANTS[name]
        assert (config.skip == "on", config.mlp) == (v.attention_skip, v.mlp), name


def test_the_toy_keeps_its_norm_rule():
    """A toy Dong san (and san+skip, san+mlp) has no norm, as in Dong et al.'s theory; the
    toy-only san+ln and the transformer have post-LN; Wu's norms are the unit sphere."""
    from rankcollapse.nets import toy_config

    assert [toy_config(n).norm for n in ("san", "san+skip", "san+mlp")] == ["none"] * 3
    assert [toy_config(n).norm for n in ("san+ln", "transformer")] == ["post", "post"]
    assert toy_config("san+ln").norm_kind == "layernorm" and "san+ln" not in VARIANTS
    wu = {n: toy_config(n) for n in TOY_VARIANTS if n.startswith("wu:")}
    assert {n for n, c in wu.items() if c.norm == "post"} == {
        v.name for v in WU_VARIANTS if v.norms
    }
    assert all(c.norm_kind == "unit" for c in wu.values() if c.norm == "post")


def test_the_variants_command_prints_the_toy_table_read_from_the_toy(capsys):
    from rankcollapse.cli import main
    from rankcollapse.nets.variants import toy_rows

    assert main(["variants"]) == 0
    out = capsys.readouterr().out
    assert "the toy network's variants" in out and "LayerNorm (toy only)" in out
    rows = toy_rows()
    assert [row["variant"] for row in rows] == list(TOY_VARIANTS)
    assert rows[0] == {"variant": "san", "attention skip": "off", "MLP block": "off",
                       "norm": "none"}  # fmt: skip
