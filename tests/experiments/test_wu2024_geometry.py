"""wu2024-geometry: findings computed from hand-made frames, and one real run on MiniLM."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from rankcollapse.errors import ConfigError
from rankcollapse.experiments import get_experiment
from rankcollapse.experiments.wu2024_geometry import _spearman, run_unit, summarize, units
from rankcollapse.metrics import dtype_floor

sys.path.insert(0, str(Path(__file__).parent / "cases"))
from wu2024_geometry import model_rows

EXP = get_experiment("wu2024-geometry")


def test_spearman_is_one_for_a_monotone_curve_and_minus_one_reversed():
    x = np.arange(5.0)
    assert _spearman(x, x**2) == pytest.approx(1.0)
    assert _spearman(x, -x) == pytest.approx(-1.0)


def test_findings_ignore_a_rank_deficient_embedding_layer_but_note_it():
    config = EXP.make_config("quick", {"models": ["minilm"]})
    summary = summarize(config, model_rows([0.1, 0.2, 0.3, 0.5], [5, 8, 8, 8]))
    found = {c.id: c for c in summary.claims}
    assert found["full-rank@minilm"].passed
    assert found["cos-grows@minilm"].measured == pytest.approx(1.0)
    assert any("layer 0" in note and "rank-deficient" in note for note in summary.notes)


def test_a_rank_drop_in_a_block_is_the_share_of_full_rank_states():
    config = EXP.make_config("quick", {"models": ["minilm"]})
    found = {c.id: c for c in summarize(config, model_rows([0.1, 0.2, 0.3], [8, 7, 8])).claims}
    assert found["full-rank@minilm"].measured == pytest.approx(0.5)


def test_random_init_models_are_measured_but_state_no_finding():
    config = EXP.make_config("quick", {"models": ["gpt2"]})
    rows = model_rows([0.1, 0.2, 0.3], [8, 8, 8], model="gpt2", init="random")
    summary = summarize(config, rows)
    assert summary.claims == []
    assert summary.tables["per model (block outputs)"]["model"].tolist() == ["gpt2"]


def test_models_are_hf_names_and_random_init_is_a_config_list():
    config = EXP.make_config("quick", {"models": ["minilm", "albert-base"],
                                       "random_init": ["albert-base"]})  # fmt: skip
    assert units(config) == [{"model": "minilm", "init": "pretrained"},
                             {"model": "albert-base", "init": "random"}]  # fmt: skip
    with pytest.raises(ConfigError, match="minilm6"):
        EXP.make_config("quick", {"models": ["minilm6"]})


@pytest.mark.slow
def test_minilm_rows_have_every_layer_metric_and_spectrum():
    config = EXP.make_config("quick", {"models": ["minilm"], "n_samples": 2, "n_tokens": 16,
                                       "n_spectra": 1})  # fmt: skip
    rows = run_unit(config, {"model": "minilm", "init": "pretrained"})
    assert set(rows["layer"]) == set(range(7)) and set(rows["device"]) == {"cpu"}
    spectra = rows[rows["metric"] == "sv"]
    assert len(spectra) == 7 * 16 and spectra.groupby("layer")["value"].max().eq(1.0).all()
    ranks = rows[rows["metric"] == "numerical_rank"]
    assert (ranks["value"] <= 16).all()
    assert isinstance(rows, pd.DataFrame)


@pytest.mark.slow
def test_singular_value_ratios_at_the_float32_floor_are_flagged():
    """A decoder with rotary positions (tiny random Llama) embeds a window's repeated token as
    two identical rows: sigma_min / sigma_max of layer 0 is float32 rounding, flagged."""
    config = EXP.make_config("quick", {"models": ["llama-small"], "random_init": ["llama-small"],
                                       "n_samples": 2, "n_tokens": 32, "n_spectra": 1})  # fmt: skip
    rows = run_unit(config, {"model": "llama-small", "init": "random"})
    ratios = rows[rows["metric"].isin(["min_sv_rel", "sv"])]
    assert ratios["at_floor"].tolist() == (ratios["value"] <= dtype_floor(torch.float32)).tolist()
    layer0 = ratios[(ratios["metric"] == "min_sv_rel") & (ratios["layer"] == 0)]
    assert layer0["at_floor"].all() and not ratios[ratios["layer"] >= 1]["at_floor"].any()
