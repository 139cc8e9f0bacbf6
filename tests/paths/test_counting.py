import math

import pytest

from rankcollapse.errors import ConfigError, InputError, UnknownNameError
from rankcollapse.paths import (
    REFERENCE_ARCHITECTURES,
    architecture_paths,
    count_paths,
    layers_and_heads,
    mean_path_length,
    n_paths,
)


@pytest.mark.parametrize("n_layers, n_heads", [(1, 1), (6, 2), (8, 3), (12, 12), (30, 9)])
def test_counts_equal_binomial_times_heads_to_the_length(n_layers, n_heads):
    df = count_paths(n_layers, n_heads)
    assert df["n_paths"].tolist() == [
        math.comb(n_layers, k) * n_heads**k for k in range(n_layers + 1)
    ]
    assert sum(df["n_paths"]) == (n_heads + 1) ** n_layers
    assert df["share"].sum() == pytest.approx(1.0, abs=1e-12)


def test_without_skips_every_path_has_full_length():
    df = count_paths(4, 3, skip=False)
    assert df["n_paths"].tolist() == [0, 0, 0, 0, 81]
    assert df["share"].tolist() == [0, 0, 0, 0, 1]
    assert mean_path_length(4, 3, skip=False) == 4


def test_bert_base_mass_sits_at_lengths_10_to_12():
    df = count_paths(12, 12)
    assert df.loc[df["length"].between(10, 12), "share"].sum() > 0.8
    assert mean_path_length(12, 12) == pytest.approx(sum(df["length"] * df["share"]), rel=1e-12)


def test_huge_counts_stay_exact_integers():
    df = count_paths(30, 9)
    assert df["n_paths"].iloc[-1] == 9**30  # beyond int64


def test_reference_architectures_take_their_sizes_from_the_model_registry():
    sizes = {
        name: tuple(architecture_paths(name)[["n_layers", "n_heads"]].iloc[0])
        for name in REFERENCE_ARCHITECTURES
    }
    assert sizes == {
        "distilbert": (6, 12),
        "bert-base": (12, 12),
        "bert-large": (24, 16),
        "gpt2": (12, 12),
        "llama-small": (30, 9),
    }


def test_a_local_model_directory_is_read_from_its_config_alone(tmp_path):
    (tmp_path / "config.json").write_text(
        '{"model_type": "bert", "num_hidden_layers": 3, "num_attention_heads": 2}'
    )
    assert layers_and_heads(tmp_path) == (3, 2)
    assert architecture_paths(str(tmp_path))["n_paths"].tolist() == [1, 6, 12, 8]


def test_length_above_depth_is_refused():
    with pytest.raises(ConfigError, match=r"k = 5 .* 0 <= k <= 4"):
        n_paths(4, 2, 5)


def test_bad_sizes_and_names_are_refused():
    with pytest.raises(ConfigError, match="n_heads is 0"):
        count_paths(3, 0)
    with pytest.raises(UnknownNameError, match="Did you mean 'bert-base'"):
        architecture_paths("bert-bas")
    with pytest.raises(InputError, match="names no depth"):
        layers_and_heads({"model_type": "odd"})
