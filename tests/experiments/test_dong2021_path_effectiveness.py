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


def test_best_short_compares_with_the_papers_baseline_and_reports_what_needs_no_attention():
    # k = 0 (no attention) scores best of all: a caveat in the note, not the gate.
    claim = _claims(table([0.95, 0.9, 0.8, 0.6, 0.3, 0.15, 0.12], full=0.99))["best-short"]
    assert claim.measured == 1 and claim.passed
    assert "best k >= 1: 1 at 0.920, +0.820 against the paper's baseline (random 0.100)" in (
        claim.note
    )
    assert "k = 0 (no attention) 0.950" in claim.note
    assert "per-position prior 0.350 (best k >= 1 +0.570)" in claim.note


def test_best_short_reports_ties_and_takes_the_longest_tied_length():
    tied = table(with_length(4, 0.9))  # k = 1 and k = 4 both at 0.9 (+ 0.02 with 20 paths)
    claim = _claims(tied)["best-short"]
    assert claim.measured == 4 and not claim.passed
    assert "best k >= 1: 1, 4 at 0.920" in claim.note


def test_best_short_fails_when_the_full_model_learned_and_no_length_beats_the_majority():
    # The audit's convex-hull run: full model 0.975, majority 0.588, the best length at 0.586.
    flat = [0.514, 0.512, 0.522, 0.496, 0.586, 0.517, 0.573]
    hull = table(flat, more=0.0, full=0.975, task="convex-hull", majority=0.588)
    claims = _claims(hull, EXP.make_config("quick", {"tasks": ["convex-hull"]}))
    best = claims["best-short"]
    assert best.verdict == "FAIL" and pd.isna(best.measured)
    assert "-0.002 against the paper's baseline (majority 0.588)" in best.note
    assert "no length beats it by 0.05" in best.note
    assert claims["full-learned"].verdict == "PASS"
    # the findings that compare path subsets cannot be decided by subsets at the baseline
    others = ["long-near-baseline", "more-paths-help", "full-beats-paths"]
    assert all(claims[name].verdict == "NOT TESTED" for name in others)
    barely = with_length(2, 0.637, flat)  # 0.049 above: still under the margin
    assert _claims(table(barely, more=0.0, full=0.975, task="convex-hull", majority=0.588),
                   EXP.make_config("quick", {"tasks": ["convex-hull"]}))["best-short"].verdict == (
        "FAIL")  # fmt: skip
    clear = with_length(2, 0.64, flat)  # 0.052 above
    claim = _claims(table(clear, more=0.0, full=0.975, task="convex-hull", majority=0.588),
                    EXP.make_config("quick", {"tasks": ["convex-hull"]}))["best-short"]  # fmt: skip
    assert claim.measured == 2 and claim.passed


def test_long_paths_are_compared_with_the_random_guess_for_sorting():
    # The audit's gate-open run: k = 6 at 0.10, near random, 0.25 below the per-position prior.
    claim = _claims(table(with_length(6, 0.08)))["long-near-baseline"]
    assert claim.measured == pytest.approx(0.08 + 0.02 - 0.1, abs=1e-12) and claim.passed
    assert "the paper's baseline: random 0.100" in claim.note
    assert not _claims(table(with_length(6, 0.35)))["long-near-baseline"].passed


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


def test_more_paths_help_is_measured_at_k_1_and_names_its_deciding_seed():
    # a k = 2 loss does not matter: the finding is about k = 1
    rows = table(more=(0.05, 0.015), seeds=(0, 1))
    k2 = (rows["n_paths"] == 20) & (rows["length"] == 2)
    rows.loc[k2, "value"] -= 0.1
    claim = _claims(rows)["more-paths-help"]
    assert claim.measured == pytest.approx(0.0325) and claim.verdict == "PASS"
    assert "deciding member: seed 1 (gain +0.015, the smallest)" in claim.note
    claim = _claims(table(more=(-0.015, -0.002), seeds=(0, 1)))["more-paths-help"]
    assert claim.verdict == "FAIL" and "seed 1 (gain -0.002, the largest)" in claim.note


def test_more_paths_help_inside_the_seed_spread_is_not_tested():
    # the audit's memorization flip: a gain of +-0.002 against a seed spread of 0.03
    claim = _claims(table(more=(0.002, -0.03, 0.01), seeds=(0, 1, 2)))["more-paths-help"]
    assert claim.verdict == "NOT TESTED"
    assert claim.untested.startswith("preset too small: the gain's sign differs between seeds")
    assert "seed 0 +0.002, seed 1 -0.030, seed 2 +0.010" in claim.untested


def test_path_findings_are_not_tested_when_no_path_beats_the_papers_baseline():
    claims = _claims(table([0.1, 0.13, 0.12, 0.1, 0.1, 0.09, 0.1], more=0.0, full=1.0))
    assert claims["full-learned"].verdict == "PASS"
    assert claims["best-short"].verdict == "FAIL"  # decided: the full model learned
    untested = {k: c.untested for k, c in claims.items() if c.verdict == "NOT TESTED"}
    assert set(untested) == {"long-near-baseline", "more-paths-help", "full-beats-paths"}
    assert all(u.startswith("not learned: no path length k >= 1") for u in untested.values())


def test_every_path_finding_waits_for_the_full_model():
    claims = _claims(table(full=0.7))
    assert claims["full-learned"].verdict == "FAIL"
    assert all(c.verdict == "NOT TESTED" for k, c in claims.items() if k != "full-learned")
    assert claims["best-short"].untested.startswith("not learned: the full model's accuracy 0.700")


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
