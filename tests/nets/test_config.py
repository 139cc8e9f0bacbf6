"""NetConfig: bad keys and values fail before any weight is drawn, naming the key."""

import pytest
from pydantic import BaseModel, Field, ValidationError

from rankcollapse.errors import ConfigError, invalid_config
from rankcollapse.nets import NetConfig


def test_defaults_are_the_pure_single_head_san():
    c = NetConfig()
    assert (c.n_heads, c.skip, c.mlp, c.norm, c.mask, c.attention) == (
        1,
        "off",
        False,
        "none",
        "complete",
        "softmax",
    )
    assert c.dtype == "float64"


def test_every_field_has_a_description_for_the_cli():
    for name, field in NetConfig.model_fields.items():
        assert field.description, name


def test_unknown_key_is_named_with_a_suggestion():
    with pytest.raises(ConfigError, match=r"no key 'n_layer'.*Did you mean 'n_layers'\?.*Keys:"):
        NetConfig(n_layer=3)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"n_layers": 0}, r"n_layers: .*greater than or equal to 1.*got 0"),
        ({"skip": "yes"}, r"skip: .*'off', 'on' or 'scaled'.*'yes'"),
        ({"norm_kind": "batchnorm"}, r"norm_kind: .*'layernorm', 'rmsnorm' or 'unit'"),
        ({"temperature": 0.0}, r"temperature: .*greater than 0"),
        ({"init_std": -1.0}, r"init_std: .*greater than 0"),
        ({"dtype": "float16"}, r"dtype: .*'float64' or 'float32'"),
        ({"mask": "windw:1"}, r"mask: unknown mask family 'windw'.*Did you mean 'window'"),
        ({"mask": "window:x"}, r"mask: mask spec 'window:x': w must be an integer"),
        ({"d_model": 4, "n_heads": 8}, r"d_model=4 < n_heads=8.*set d_qk and d_v"),
        ({"out_proj": False, "n_heads": 3, "d_model": 8}, r"n_heads \* d_v must equal d_model"),
    ],
)
def test_bad_values_raise_config_error_naming_the_key(values, message):
    with pytest.raises(ConfigError, match=message):
        NetConfig(**values)


def test_the_input_is_named_once():
    """A check that quotes the input is not followed by "(got ...)" again; one that does not
    quote it is, and a number always is (0 appears in "10" without being quoted there)."""
    with pytest.raises(ConfigError) as caught:
        NetConfig(mask="window:x", n_layers=0)
    message = str(caught.value)
    assert message.count("'window:x'") == 1 and "(got 0)" in message
    assert not message.endswith("..")

    class Sizes(BaseModel):
        n_heads: int = Field(12, ge=10)

    with pytest.raises(ValidationError) as caught_sizes:
        Sizes(n_heads=0)
    said = str(invalid_config("Sizes", caught_sizes.value, Sizes.model_fields))
    assert said.endswith("greater than or equal to 10 (got 0).")


def test_explicit_head_sizes_allow_more_heads_than_width():
    c = NetConfig(d_model=4, n_heads=8, d_qk=2, d_v=2)
    assert c.n_heads == 8
