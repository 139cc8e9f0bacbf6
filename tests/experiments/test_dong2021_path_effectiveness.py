import sys
from pathlib import Path

import pandas as pd
import pytest

from rankcollapse.errors import ConfigError
from rankcollapse.experiments import get_experiment

sys.path.insert(0, str(Path(__file__).parent / "cases"))
from dong2021_path_effectiveness import PEAKED, table, with_length

EXP = get_experiment("dong2021-path-effectiveness")
CONFIG = EXP.make_config("quick", {"tasks": ["sorting"]})
QUICK_REPEATS = 20


def _claims(results: pd.DataFrame, config=CONFIG) -> dict:
    return {c.id.split(":")[1]: c for c in EXP.claims(config, results)}


def test_best_short_is_decided_over_seeds_against_the_papers_baseline():
    # k = 0 (no attention) scores best of all: a caveat in the note, not a gate.
    claim = _claims(table([0.95, 0.9, 0.8, 0.6, 0.3, 0.15, 0.12], full=0.99))["best-short"]
    assert claim.verdict == "PASS" and claim.n_units == 2
    assert claim.measured == pytest.approx(0.92 - 0.1)  # k = 1 with 20 paths, minus random
    assert claim.paper == "short paths carry predictive power"
    assert "k = 0 (no attention) 0.950" in claim.note
    assert "per-position prior 0.350" in claim.note


def test_convex_hull_is_decided_on_the_authors_line_and_shows_the_measured_majority():
    # The audit's quick run: k = 1 at 0.636, the authors' line 0.54, the measured majority 0.600.
    curve = with_length(1, 0.616, [0.613, 0.616, 0.567, 0.554, 0.566, 0.56, 0.51])
    hull = table(curve, more=(0.02, 0.021), full=0.948, task="convex-hull", majority=0.6)
    claim = _claims(hull, EXP.make_config("quick", {"tasks": ["convex-hull"]}))["best-short"]
    assert claim.verdict == "PASS"
    assert claim.measured == pytest.approx(0.6365 - 0.54)
    assert "against the measured majority (0.600): " in claim.note


def test_more_paths_help_inside_the_seed_spread_is_not_tested_with_the_seeds_needed():
    claim = _claims(table(more=(0.002, -0.03, 0.01), seeds=(0, 1, 2)))["more-paths-help"]
    assert claim.verdict == "NOT TESTED" and claim.kind == "beyond"
    assert claim.untested.startswith("preset too small") and claim.n_needed > 3
    assert "seed 0: +0.002, seed 1: -0.030, seed 2: +0.010" in claim.note


def test_every_path_finding_assumes_the_full_model_learned():
    claims = _claims(table(full=0.7))
    assert "full-learned" not in claims
    assert all(c.verdict == "NOT TESTED" for c in claims.values())
    assert claims["best-short"].untested.startswith(
        "assumptions not met: the full model learned sorting"
    )


def test_a_unit_reports_the_full_model_baselines_paths_and_training(run_quick):
    tiny = {"n_train": 40, "n_eval": 8, "n_layers": 2, "d_model": 8, "steps": 3}
    config, rows = run_quick(
        EXP.name, {"tasks": ["sorting"], "sorting": tiny, "n_repeats": 2, "seeds": [0]}
    )
    assert rows.iloc[0][["kind", "metric"]].tolist() == ["full", "accuracy"]
    assert set(rows["device"]) == {"cpu"}
    baselines = rows[rows["kind"] == "baseline"].set_index("metric")["value"]
    assert baselines["position_majority"] >= baselines["majority"]
    paths = rows[rows["kind"] == "paths"]
    assert len(paths) == 2 * 3 * 2  # n_paths {5, 20} x lengths 0..2 x 2 repeats
    # The empty path (k = 0) is the same for every sample: no spread over repeats.
    assert paths[paths["length"] == 0]["value"].nunique() == 1
    training = rows[rows["kind"] == "training"].set_index("metric")["value"]
    assert training["reused_checkpoint"] == 0.0 and training["final_loss"] > 0
    summary = EXP.summarize(config, rows)
    assert [c.id for c in summary.claims] == [c.id for c in EXP.claims(config, rows)]
    assert "accuracy vs path length" in summary.figures


def test_bad_settings_get_clear_errors():
    with pytest.raises(ConfigError, match="n_paths"):
        EXP.make_config("quick", {"n_paths": [0]})
    with pytest.raises(ConfigError, match="tasks"):
        EXP.make_config("quick", {"tasks": ["sortin"]})
    with pytest.raises(ConfigError, match="d_model=10 is not divisible by n_heads=3"):
        EXP.make_config("quick", {"convex_hull": {"d_model": 10, "n_heads": 3}})
    with pytest.raises(ConfigError, match="device"):
        EXP.make_config("quick", {"device": "tpu"})
    with pytest.raises(ConfigError, match="dropout"):
        EXP.make_config("quick", {"sorting": {"dropout": 1.0}})


def test_the_quick_preset_trains_the_authors_san_on_three_seeds():
    quick = EXP.make_config("quick")
    assert quick.seeds == [0, 1, 2] and quick.n_paths == [5, 20]
    assert quick.n_repeats == QUICK_REPEATS
    setups = [quick.sorting, quick.convex_hull, quick.memorization]
    assert [s.dropout for s in setups] == [0.1, 0.1, 0.1]  # the authors' rate, in training
    assert (quick.sorting.n_layers, quick.sorting.n_heads, quick.sorting.d_model) == (6, 2, 48)
    assert (quick.sorting.n_train, quick.sorting.steps, quick.sorting.lr) == (10000, 1500, 3e-3)
    assert (quick.convex_hull.n_heads, quick.convex_hull.d_model) == (3, 48)
    assert (quick.memorization.n_train, quick.memorization.n_tokens) == (100, 24)


def test_presets_match_the_paper_sizes():
    paper = EXP.make_config("paper")
    assert (paper.sorting.n_layers, paper.sorting.n_heads, paper.sorting.d_model) == (6, 2, 48)
    assert (paper.convex_hull.n_heads, paper.convex_hull.d_model) == (3, 84)
    assert (paper.sorting.n_tokens, paper.convex_hull.n_tokens) == (8, 10)
    assert paper.n_paths == [5, 20] and str(paper.device) == "cpu"
    assert paper.seeds == [0, 1, 2] and paper.sorting.dropout == 0.1
    assert PEAKED.index(max(PEAKED[1:])) == 1  # the hand-made curve peaks at k = 1
