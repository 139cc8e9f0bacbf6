"""One bound per size, declared once (`rankcollapse.sizes`): every size-like field of every
registered experiment's config is typed by its size type, and no field widens the bound."""

import typing
from typing import Annotated

import pytest
from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from rankcollapse.errors import ConfigError
from rankcollapse.experiments import experiment_names, get_experiment
from rankcollapse.sizes import SIZES, NLayers, NTokens, Size


def _size_name(field: str) -> str | None:
    """The size a field counts, by its name: n_layers, deep_n_layers, d_models, ..."""
    for name in SIZES:
        if field == name or field.endswith((f"_{name}", f"{name}s")):
            return name
    return None


def _submodel(annotation) -> type[BaseModel] | None:
    return (
        annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    )


def _size_fields(config: type[BaseModel], prefix: str = ""):
    """(dotted name, size name, field info) of every size-like field, sub-configs included."""
    for field, info in config.model_fields.items():
        if (sub := _submodel(info.annotation)) is not None:
            yield from _size_fields(sub, f"{prefix}{field}.")
        elif (size := _size_name(field)) is not None:
            yield f"{prefix}{field}", size, info


def _markers(annotation, metadata=()) -> list[Size]:
    """The `Size` markers in a field's metadata and anywhere inside its annotation."""
    found = [m for m in metadata if isinstance(m, Size)]
    found += [m for m in getattr(annotation, "__metadata__", ()) if isinstance(m, Size)]
    return found + [m for arg in typing.get_args(annotation) for m in _markers(arg)]


def _every_size_field():
    return [
        pytest.param(info, size, id=f"{name}.{field}")
        for name in experiment_names()
        for field, size, info in _size_fields(get_experiment(name).config)
    ]


SIZE_FIELDS = _every_size_field()


def test_the_meta_test_finds_the_size_fields_of_every_kind():
    ids = {param.id for param in SIZE_FIELDS}
    for expected in (
        "wu2024-masks.deep_n_layers",  # a prefixed name
        "amsel2024-depth.n_layers",  # a list
        "amsel2024-rank-vs-heads.d_models",  # a plural
        "dong2021-path-effectiveness.sorting.n_layers",  # a sub-config
        "dong2021-rank-collapse.n_layers",  # optional
    ):
        assert expected in ids
    assert len(ids) >= 60


@pytest.mark.parametrize(("info", "size"), SIZE_FIELDS)
def test_every_size_field_uses_the_one_bound(info, size):
    assert [m.name for m in _markers(info.annotation, info.metadata)] == [size]
    bound = SIZES[size]
    field = TypeAdapter(Annotated[info.annotation, *info.metadata])
    listed = typing.get_origin(info.annotation) is list
    for outside in (bound.low - 1, bound.high + 1):  # narrowed, never widened
        with pytest.raises(ValidationError):
            field.validate_python([outside] if listed else outside)


def test_a_size_type_bounds_list_elements_and_narrows_but_never_widens():
    class Cfg(BaseModel):
        depths: list[NLayers] = [1]
        tokens: NTokens = Field(8, ge=4)
        wide: NTokens = Field(8, le=10**6)

    assert Cfg(depths=[1, 4096], tokens=4, wide=16384).depths == [1, 4096]
    for values in ({"depths": [0]}, {"depths": [4097]}, {"tokens": 3}, {"wide": 16385}):
        with pytest.raises(ValidationError):
            Cfg(**values)
    schema = Cfg.model_json_schema()["properties"]["tokens"]
    assert (schema["minimum"], schema["maximum"]) == (4, 16384)


@pytest.mark.parametrize(
    ("name", "values", "message"),
    [
        ("amsel2024-encoder", {"n_layers": [0], "n_heads": [0]}, r"n_layers\.0"),
        ("amsel2024-depth", {"n_layers": [5000]}, r"n_layers\.0.*4096"),
        ("wu2024-masks", {"deep_n_layers": 10**6}, r"deep_n_layers.*4096"),
        ("wu2024-equilibria", {"n_layers": 10**6}, r"n_layers.*4096"),
        ("wu2024-counterexample", {"n_layers": 10**6}, r"n_layers.*4096"),
    ],
)
def test_a_size_beyond_its_bound_is_refused_when_the_config_is_made(name, values, message):
    with pytest.raises(ConfigError, match=message):
        get_experiment(name).make_config("quick", values)


@pytest.mark.parametrize(
    "depth", [{"n_layers": 5000}, {"config_overrides": {"num_hidden_layers": 0}}]
)
def test_a_random_inits_depth_has_the_one_bound(depth):
    from rankcollapse.hf import load_model

    with pytest.raises(
        ConfigError, match=r"n_layers is (5000|0); it must be at least 1 and at most 4096"
    ):
        load_model("bert-base", init="random", **depth)


def test_a_model_folder_deeper_than_the_bound_is_refused(tmp_path):
    import json

    from rankcollapse.errors import InputError
    from rankcollapse.hf.folders import read_model_config

    config = {"model_type": "bert", "hidden_size": 8, "num_attention_heads": 2}
    (tmp_path / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 4097}))
    with pytest.raises(InputError, match="num_hidden_layers = 4097 in config.json .at most 4096"):
        read_model_config(tmp_path)
