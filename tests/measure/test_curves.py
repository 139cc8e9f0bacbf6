"""measure.curves: Wu's curves of real models, through the probe's parts; an overflowed curve is a
`diverged` row, told apart by its exception type; toy curves share their inputs."""

import numpy as np
import pytest
import torch

from rankcollapse.errors import InputError
from rankcollapse.masks import parse_mask_spec
from rankcollapse.measure import ModelSource, load_cached, real_curves, toy_curves
from rankcollapse.variants import VARIANTS

SAN, SAN_SKIP = VARIANTS["wu:san"], VARIANTS["wu:san+skip"]

TINY = ModelSource("bert-base", "random", seed=0, n_layers=1)

SIZES = {"n_layers": 3, "d_model": 8, "n_tokens": 6, "n_samples": 2, "seed": 0}


def test_a_model_source_loads_in_its_dtype_and_the_last_one_is_kept():
    loaded = load_cached(TINY)
    assert loaded.model.dtype == torch.float32 and loaded.n_layers == 1
    assert load_cached(ModelSource("bert-base", "random", seed=0, n_layers=1)) is loaded
    double = ModelSource("bert-base", "random", seed=0, dtype=torch.float64, n_layers=1)
    assert load_cached(double).model.dtype == torch.float64


def test_real_curves_give_short_variant_names_the_mask_string_and_each_mode():
    loaded = load_cached(TINY)
    frame = real_curves(
        loaded, [SAN, SAN_SKIP], parse_mask_spec("window:1"), modes=["eval", "train"],
        n_samples=2, n_tokens=8, seed=0,
    )  # fmt: skip
    assert set(frame["variant"]) == {"san", "san+skip"}
    assert set(frame["mask"]) == {"window:1"} and set(frame["mode"]) == {"eval", "train"}
    assert sorted(frame["layer"].unique()) == [0, 1]


def test_an_overflowing_curve_is_one_diverged_row_and_other_errors_propagate(monkeypatch):
    import importlib

    probe_module = importlib.import_module("rankcollapse.measure.layers")
    validation = importlib.import_module("rankcollapse._validation")
    loaded = load_cached(TINY)
    mask = parse_mask_spec("complete")
    options = {"modes": ["eval"], "n_samples": 2, "n_tokens": 8, "seed": 0}

    def overflowed(x, *args, **kwargs):
        validation.check_tokens(torch.full_like(x, float("inf")))

    monkeypatch.setattr(probe_module, "measure_states", overflowed)
    frame = real_curves(loaded, [SAN], mask, **options)
    assert frame[["variant", "metric", "value"]].values.tolist() == [["san", "diverged", 1.0]]

    def other(*args, **kwargs):
        raise InputError("mentions NaN but is not an overflow")

    monkeypatch.setattr(probe_module, "measure_states", other)
    with pytest.raises(InputError, match="not an overflow"):
        real_curves(loaded, [SAN], mask, **options)


def test_every_variant_starts_from_the_same_tokens_and_pure_san_collapses():
    frame = toy_curves(
        [VARIANTS["wu:san"], VARIANTS["wu:san+skip+ln"]], parse_mask_spec("causal"), **SIZES
    )
    layer0 = frame[(frame["layer"] == 0) & (frame["metric"] == "mu")]
    assert layer0.groupby("sample")["value"].nunique().eq(1).all()
    san = frame[(frame["variant"] == "san") & (frame["metric"] == "mu_rel")]
    by_layer = san.groupby("layer")["value"].mean()
    assert by_layer.iloc[-1] < by_layer.iloc[0]
    assert set(frame["mode"]) == {"eval"} and set(frame["model"]) == {"toy"}


def test_the_weights_seed_and_the_data_seed_are_different_streams():
    complete = parse_mask_spec("complete")
    a = toy_curves([VARIANTS["wu:san"]], complete, **SIZES)
    b = toy_curves([VARIANTS["wu:san"]], complete, **{**SIZES, "seed": 1})
    assert not np.allclose(a["value"], b["value"])


def test_real_curves_read_their_windows_from_a_text_file_and_refuse_one_too_short(tmp_path):
    loaded = load_cached(TINY)
    common = {"modes": ["eval"], "n_samples": 2, "n_tokens": 8, "seed": 0}
    window = parse_mask_spec("complete")
    corpus = real_curves(loaded, [SAN_SKIP], window, **common)
    text = tmp_path / "fortunes.txt"
    text.write_text(
        "A classic is something that everyone wants to have read and nobody wants to read. " * 4
    )
    from_file = real_curves(loaded, [SAN_SKIP], window, text=text, **common)
    assert from_file.shape == corpus.shape
    assert not np.allclose(from_file["value"], corpus["value"])  # other windows, other values
    text.write_text("Too short.")
    with pytest.raises(InputError, match="windows"):
        real_curves(loaded, [SAN_SKIP], window, text=text, **common)
