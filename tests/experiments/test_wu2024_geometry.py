"""wu2024-geometry: claims computed from a hand-made frame, and one real run on MiniLM."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rankcollapse.experiments import get_experiment
from rankcollapse.experiments.wu2024_geometry import _spearman, run_unit, summarize

EXP = get_experiment("wu2024-geometry")


def _frame(cos_by_layer, rank_by_layer, min_sv_rel=1e-2):
    rows = []
    for layer, (cos, rank) in enumerate(zip(cos_by_layer, rank_by_layer)):
        for metric, value in [("abs_cos_mean", cos), ("numerical_rank", rank),
                              ("min_sv_rel", min_sv_rel), ("stable_rank", 2.0),
                              ("min_sv", 1.0), ("mu_rel", 0.5)]:  # fmt: skip
            rows.append({"model": "m", "init": "pretrained", "layer": layer, "sample": 0,
                         "index": np.nan, "metric": metric, "value": value,
                         "at_floor": False, "full_rank": 8})  # fmt: skip
    return pd.DataFrame(rows)


def test_spearman_is_one_for_a_monotone_curve_and_minus_one_reversed():
    x = np.arange(5.0)
    assert _spearman(x, x**2) == pytest.approx(1.0)
    assert _spearman(x, -x) == pytest.approx(-1.0)


def test_claims_ignore_a_rank_deficient_embedding_layer_but_note_it():
    config = EXP.make_config("quick", {"models": ["minilm"]})
    summary = summarize(config, _frame([0.1, 0.2, 0.3, 0.5], [5, 8, 8, 8]))
    claims = {c.id: c for c in summary.claims}
    assert claims["full-rank@m/pretrained"].passed
    assert claims["cos-grows@m/pretrained"].measured == pytest.approx(1.0)
    assert any("layer 0" in note and "rank-deficient" in note for note in summary.notes)


def test_a_rank_drop_in_a_block_fails_the_full_rank_claim():
    config = EXP.make_config("quick", {"models": ["minilm"]})
    summary = summarize(config, _frame([0.1, 0.2, 0.3], [8, 7, 8], min_sv_rel=1e-6))
    claims = {c.id: c for c in summary.claims}
    assert not claims["full-rank@m/pretrained"].passed
    assert claims["full-rank@m/pretrained"].measured == pytest.approx(0.5)
    assert not claims["min-sv-away@m/pretrained"].passed


@pytest.mark.slow
def test_minilm_rows_have_every_layer_metric_and_spectrum():
    config = EXP.make_config("quick", {"models": ["minilm"], "n_samples": 2, "n_tokens": 16,
                                       "n_spectra": 1})  # fmt: skip
    rows = run_unit(config, {"model": "minilm", "init": "pretrained"})
    assert set(rows["layer"]) == set(range(7))
    spectra = rows[rows["metric"] == "sv"]
    assert len(spectra) == 7 * 16 and spectra.groupby("layer")["value"].max().eq(1.0).all()
    ranks = rows[rows["metric"] == "numerical_rank"]
    assert (ranks["value"] <= 16).all()
