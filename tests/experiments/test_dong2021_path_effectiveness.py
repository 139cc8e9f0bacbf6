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


def _claims(results: pd.DataFrame, config=CONFIG) -> dict:
    return {c.id.split(":")[1]: c for c in EXP.claims(config, results)}


def test_best_short_ignores_the_embedding_alone():
    # k = 0 (no attention) scores best of all; the best path through attention is k = 1.
    claim = _claims(table([0.95, 0.9, 0.8, 0.6, 0.4, 0.35, 0.42], full=0.99))["best-short"]
    assert pd.isna(claim.measured) and not claim.passed  # k = 1 does not beat k = 0
    assert "best k >= 1: 1 at 0.920" in claim.note and "(k = 0 0.950)" in claim.note
    assert "no length beats it by 0.05" in claim.note
    claim = _claims(table([0.5, 0.9, 0.8, 0.6, 0.4, 0.35, 0.42]))["best-short"]
    assert claim.measured == 1 and claim.passed


def test_best_short_reports_ties_and_takes_the_longest_tied_length():
    tied = table(with_length(4, 0.9))  # k = 1 and k = 4 both at 0.9 (+ 0.02 with 20 paths)
    claim = _claims(tied)["best-short"]
    assert claim.measured == 4 and not claim.passed
    assert "best k >= 1: 1, 4 at 0.920" in claim.note


def test_best_short_needs_a_margin_over_the_best_trivial_baseline():
    # The convex-hull case of issue 12: the best length only equals the majority baseline.
    flat = [0.55, 0.57, 0.593, 0.58, 0.57, 0.56, 0.55]
    claim = _claims(table(flat, more=0.0, majority=0.593, position_majority=0.4))["best-short"]
    assert pd.isna(claim.measured) and not claim.passed
    assert "+0.000 against" in claim.note and "(majority 0.593)" in claim.note
    barely = [0.55, 0.57, 0.64, 0.58, 0.57, 0.56, 0.55]  # 0.047 above: still under the margin
    assert not _claims(table(barely, more=0.0, majority=0.593))["best-short"].passed
    clear = [0.55, 0.57, 0.65, 0.58, 0.57, 0.56, 0.55]  # 0.057 above
    assert _claims(table(clear, more=0.0, majority=0.593))["best-short"].measured == 2


def test_the_per_position_prior_is_the_baseline_when_it_is_the_best_one():
    # Long paths at 0.42: within 0.1 of the per-position prior 0.4, far above the majority 0.2.
    claims = _claims(table(position_majority=0.4, majority=0.2))
    assert claims["long-near-baseline"].measured == pytest.approx(0.42 + 0.02 - 0.4)
    assert "position majority 0.400" in claims["long-near-baseline"].note
    # Without the position prior the same curve is 0.24 above the global majority: it fails.
    no_prior = table().query("metric != 'position_majority'")
    assert not _claims(no_prior)["long-near-baseline"].passed


def test_findings_over_seeds_pool_the_seeds_and_count_those_that_agree():
    one = table(seeds=(0,))
    other = table(with_length(3, 0.95), seeds=(1,))  # seed 1 peaks at k = 3
    claims = _claims(pd.concat([one, other], ignore_index=True))
    best = claims["best-short"]
    # pooled: k = 1 at 0.92 against k = 3 at (0.6 + 0.95) / 2 + 0.02 = 0.795
    assert best.measured == 1 and best.passed
    assert "1 of 2 seeds agree" in best.note
    full = claims["full-beats-paths"]
    assert full.measured == pytest.approx(0.99 - 0.92)
    assert "2 of 2 seeds agree" in full.note


def test_more_paths_help_compares_20_with_5_paths_at_short_lengths():
    claim = _claims(table(more=0.015))["more-paths-help"]
    assert claim.measured == pytest.approx(0.015) and claim.passed
    assert _claims(table(more=-0.015))["more-paths-help"].verdict == "FAIL"


def test_path_findings_are_not_tested_when_no_path_beats_the_baselines():
    claims = _claims(table([0.3, 0.38, 0.36, 0.33, 0.3, 0.25, 0.16], full=1.0))
    assert claims["full-learned"].verdict == "PASS"
    untested = {k: c.untested for k, c in claims.items() if c.verdict == "NOT TESTED"}
    assert set(untested) == {"best-short", "long-near-baseline", "more-paths-help",
                             "full-beats-paths"}  # fmt: skip
    assert all(u.startswith("not learned: no path length k >= 1") for u in untested.values())


def test_a_unit_reports_the_full_model_baselines_paths_and_training(run_quick):
    tiny = {"n_train": 40, "n_eval": 8, "n_layers": 2, "d_model": 8, "steps": 3}
    config, rows = run_quick(EXP.name, {"tasks": ["sorting"], "sorting": tiny, "n_repeats": 2})
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


def test_presets_match_the_paper_sizes():
    paper = EXP.make_config("paper")
    assert (paper.sorting.n_layers, paper.sorting.n_heads, paper.sorting.d_model) == (6, 2, 48)
    assert (paper.convex_hull.n_heads, paper.convex_hull.d_model) == (3, 84)
    assert (paper.sorting.n_tokens, paper.convex_hull.n_tokens) == (8, 10)
    assert paper.n_paths == [5, 20] and str(paper.device) == "cpu"
    assert PEAKED.index(max(PEAKED[1:])) == 1  # the hand-made curve peaks at k = 1
