"""The Amsel et al. 2024 experiments: the claims' computations on small hand-made tables
(values per seed, the runs' presupposed training, missing members), then one tiny run of each
trained experiment (rows, baselines, device)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pandas as pd
import pytest

from rankcollapse.errors import ConfigError
from rankcollapse.experiments import amsel2024_depth as depth
from rankcollapse.experiments import get_experiment
from rankcollapse.experiments.amsel2024_depth import runs
from rankcollapse.experiments.amsel2024_rank_vs_heads import grid_points, resolve_rank

CASES = Path(__file__).parent / "cases"


def _cases(module: str):
    sys.path.insert(0, str(CASES))
    try:
        spec = importlib.util.spec_from_file_location(f"cases_{module}", CASES / f"{module}.py")
        loaded = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(loaded)
    finally:
        sys.path.remove(str(CASES))
    return loaded


def _claims(name: str, overrides: dict, table: pd.DataFrame) -> dict:
    exp = get_experiment(name)
    return {c.id: c for c in exp.claims(exp.make_config("quick", overrides), table)}


# amsel2024-depth ------------------------------------------------------------------------------

DEPTH = _cases("amsel2024_depth")


def test_depth_cpu_preset_trains_one_and_five_layers_with_scratch_on_the_full_schedule():
    exp = get_experiment("amsel2024-depth")
    cpu = exp.make_config("cpu")
    assert (
        cpu.n_layers == [1, depth.PAPER_DEPTH] and cpu.contexts == [4, 8] and cpu.batch_size == 256
    )
    assert cpu.scratch and depth.width(cpu) == 8 + 8  # Thm 5's positions: rank-1 H = 16
    assert cpu.patience * 50 > cpu.steps  # no early stop: every run ends its cosine schedule
    assert cpu.steps >= depth.DECISIVE_STEPS and len(cpu.seeds) >= 3  # decides: units to spare
    # the gates stay those of every preset
    quick = exp.make_config("quick")
    gates = ("plateau_tail", "plateau_tol", "learn_margin", "eval_samples", "approach")
    assert all(getattr(cpu, key) == getattr(quick, key) for key in gates)
    assert "The cpu preset" in sys.modules[exp.run_unit.__module__].__doc__  # its departures
    units = exp.units(cpu)
    # one unit per shape (2 contexts x (1 + 2 depths of rank-1 heads)), its seeds trained as one
    assert {u["n_heads"] for u in units} == {16, 1} and len(units) == 2 * (2 + 1)
    assert all(u["seeds"] == cpu.seeds for u in units)
    # longest first (N = 8, 5 layers): a fresh run, which knows no unit's time, starts it first
    assert [(u["n_points"], u["n_layers"], u["n_heads"]) for u in units] == [
        (8, 5, 16), (8, 1, 16), (4, 5, 16), (4, 1, 16), (8, 1, 1), (4, 1, 1)
    ]  # fmt: skip


def test_depth_runs_measure_the_tail_of_each_loss_curve():
    config = get_experiment("amsel2024-depth").make_config("quick", DEPTH.OVERRIDES)
    table = runs(config, DEPTH.table(DEPTH.HELPS, stalled={(8, 2, DEPTH.R, 1)}))
    stalled = table[(table.n_points == 8) & (table.n_layers == 2) & (table.n_heads == DEPTH.R)]
    # FLAT's last four points 0.31, 0.3, 0.3, 0.3: (0.305 - 0.3) / 0.305; FALLING's: 0.65 -> 0.45
    assert stalled.set_index("seed").tail_change.to_dict() == pytest.approx(
        {0: 0.005 / 0.305, 1: 0.2 / 0.65}
    )
    assert table.converged.sum() == len(table) - 1
    full = table[(table.n_points == 2) & (table.n_heads == 1)]
    assert full.error.tolist() == pytest.approx([0.05, 0.06])  # seeds 0 and 1


def test_depth_findings_take_the_closure_seed_by_seed():
    claims = _claims("amsel2024-depth", DEPTH.LONG, DEPTH.table(DEPTH.HELPS))
    short = [(0.4 - 0.1) / (0.4 - 0.05), (0.41 - 0.11) / (0.41 - 0.06)]  # N=2, seeds 0 and 1
    assert claims["depth-approaches-full-rank-short"].measured == pytest.approx(sum(short) / 2)
    assert claims["depth-approaches-full-rank-short"].n_units == 2
    assert claims["full-rank-needed-long"].measured == pytest.approx(0.0)  # N=8: no gain
    assert claims["depth-helps-short-more"].measured == pytest.approx(sum(short) / 2)
    assert "N=2: rank 1 0.405 (1 layer(s)) -> 0.105 (2), full rank 0.055" in (
        claims["depth-approaches-full-rank-short"].note
    )
    assert all(c.passed and c.source and c.paper for c in claims.values())


def test_depth_closure_without_a_gap_is_nan_and_fails():
    assert math.isnan(depth.closure(0.05, 0.04, 0.05))
    flat = {**DEPTH.HELPS, (8, 1, DEPTH.R): 0.2, (8, 2, DEPTH.R): 0.2}  # rank 1 = full rank
    claims = _claims("amsel2024-depth", DEPTH.LONG, DEPTH.table(flat))
    assert claims["full-rank-needed-long"].verdict == "FAIL"


def test_depth_run_that_has_not_converged_leaves_the_finding_untested_and_is_named():
    table = DEPTH.table(DEPTH.HELPS, stalled={(2, 2, DEPTH.R, 0)})
    claims = _claims("amsel2024-depth", DEPTH.LONG, table)
    helps = claims["depth-approaches-full-rank-short"]
    assert helps.verdict == "NOT TESTED" and helps.untested.startswith("assumptions not met")
    assert "converged" in helps.untested and "1 of 6 runs still moved" in helps.untested
    assert "N=2, 2 layer(s), rank 1, seed 0: error 0.1 (baseline 0.5), tail +30.8%" in (
        helps.untested
    )  # (0.65 - 0.45) / 0.65
    assert claims["full-rank-needed-long"].passed  # it uses only N=8, all converged


@pytest.mark.parametrize("errors", ["SHORT_STUCK", "HELPS", "LONG_CLOSES"])
def test_depth_findings_below_the_deciding_steps_are_not_tested_whichever_side(errors):
    short_run = _claims("amsel2024-depth", {**DEPTH.OVERRIDES, "steps": 1500},
                        DEPTH.table(getattr(DEPTH, errors)))  # fmt: skip
    for claim in short_run.values():
        assert claim.verdict == "NOT TESTED", claim
        assert f"trained at least {depth.DECISIVE_STEPS} steps (1500 steps" in claim.untested
        assert "the cpu preset" in claim.decides


def test_what_decides_is_the_cpu_preset_below_its_steps_or_depth_and_more_seeds_at_them():
    """A run short of the deciding steps or of the paper's depth is sent to the cpu preset; a
    cpu run still NOT TESTED by its spread is sent to more seeds, with what each costs
    (measured)."""
    experiment = get_experiment("amsel2024-depth")
    quick, cpu = experiment.make_config("quick"), experiment.make_config("cpu")
    shallow = experiment.make_config("cpu", {"n_layers": [1, 3]})
    for config in (quick, shallow):
        assert depth.decides(config).startswith("the cpu preset (20,000 steps, 1 and 5 layers")
        assert f"{8 * depth.SECONDS_PER_SEED:,} s of units" in depth.decides(config)
    assert depth.decides(cpu).startswith("that many seeds (--set seeds=[0, 1, ...]")
    assert f"{depth.SECONDS_PER_SEED:,} s of units" in depth.decides(cpu)
    # the measured units: a 5-layer unit costs more than its 1-layer sibling
    assert depth.UNIT_SECONDS[(8, 5, 16)] > depth.UNIT_SECONDS[(8, 1, 16)]


def test_depth_short_of_full_rank_after_the_deciding_steps_fails():
    trained = _claims("amsel2024-depth", DEPTH.LONG, DEPTH.table(DEPTH.SHORT_STUCK))
    assert trained["depth-approaches-full-rank-short"].verdict == "FAIL"
    assert trained["depth-approaches-full-rank-short"].note.startswith("the paper says")


def test_depth_plateau_at_the_baseline_is_not_learning():
    claims = _claims("amsel2024-depth", DEPTH.LONG, DEPTH.table(DEPTH.AT_BASELINE))
    helps, full = claims["depth-helps-short-more"], claims["full-rank-needed-long"]
    # the full-rank arm at N=8 (0.6, 0.61) is not below 0.9 x 0.62: no reference to approach
    assert helps.verdict == "NOT TESTED" and "not learned" in helps.untested
    assert "2 of 4 reference runs" in helps.untested
    assert full.verdict == "NOT TESTED" and "full rank" in full.untested


def test_depth_missing_run_fails_rather_than_being_skipped():
    table = DEPTH.table(DEPTH.HELPS)
    table = table[~((table.n_points == 8) & (table.n_layers == 2) & (table.seed == 1))]
    claims = _claims("amsel2024-depth", DEPTH.LONG, table)
    assert claims["depth-helps-short-more"].verdict == "FAIL"
    assert claims["full-rank-needed-long"].verdict == "FAIL"
    assert claims["depth-approaches-full-rank-short"].passed  # N=2 is complete


def test_depth_run_trains_rank_one_heads_on_the_scratch_width(run_quick):
    overrides = {"d_model": 4, "contexts": [2, 3], "n_layers": [1, 2], "steps": 60,
                 "eval_samples": 64, "batch_size": 16, "d_ff": 8}  # fmt: skip
    config, results = run_quick("amsel2024-depth", overrides)
    final = results[results.metric == "eval_rel_mse"]
    assert set(final.n_heads) == {4 + 3, 1} and set(final.d_qk) == {1, 7}
    assert final.value.notna().all() and len(final) == 2 * 3
    ids = {c.id for c in get_experiment("amsel2024-depth").claims(config, results)}
    assert ids == {"depth-approaches-full-rank-short", "full-rank-needed-long",
                   "depth-helps-short-more"}  # fmt: skip


# amsel2024-encoder ----------------------------------------------------------------------------

ENCODER = _cases("amsel2024_encoder")


def test_encoder_finding_takes_every_seed_and_a_dissenting_seed_leaves_it_open():
    overrides = {**ENCODER.OVERRIDES, "seeds": [0, 1, 2]}
    seed2 = ENCODER.table(ENCODER.DEPTH_WINS).query("seed == 0").assign(seed=2)
    table = pd.concat([ENCODER.table(ENCODER.RANK_WINS), seed2], ignore_index=True)
    claim = _claims("amsel2024-encoder", overrides, table)["rank-beats-heads-and-layers"]
    # seeds 0, 1: (0.2 / 0.6) / (0.5 / 0.6) = 0.4; seed 2: (0.45 / 0.6) / (0.3 / 0.6) = 1.5
    assert claim.measured == pytest.approx((0.4 + 0.4 + 1.5) / 3)
    assert claim.verdict == "NOT TESTED" and claim.n_needed > 3
    assert "against 0.67 for the best predictor that selects nothing" in claim.note


def test_encoder_without_a_full_rank_arm_is_not_tested():
    overrides = {**ENCODER.OVERRIDES, "n_heads": [2, 8]}
    table = ENCODER.table(
        {(2 if h == 1 else h, n, m): e for (h, n, m), e in ENCODER.RANK_WINS.items()}
    )
    claim = _claims("amsel2024-encoder", overrides, table)["rank-beats-heads-and-layers"]
    assert claim.verdict == "NOT TESTED" and "a full-rank arm (H = 1)" in claim.untested


def test_encoder_seed_with_a_missing_cell_counts_as_nan():
    overrides = {**ENCODER.OVERRIDES, "seeds": [0, 1, 2]}
    claim = _claims("amsel2024-encoder", overrides, ENCODER.table(ENCODER.RANK_WINS))
    assert math.isnan(claim["rank-beats-heads-and-layers"].measured)
    assert claim["rank-beats-heads-and-layers"].verdict == "FAIL"


# amsel2024-rank-vs-heads ----------------------------------------------------------------------

RANK = _cases("amsel2024_rank_vs_heads")


def test_rank_vs_heads_takes_the_seeds_that_learned_and_names_the_others():
    claims = _claims("amsel2024-rank-vs-heads", RANK.OVERRIDES, RANK.GOOD)
    wins = claims["full-rank-wins"]
    expected = (math.log10(0.01 / 0.5) + math.log10(0.012 / 0.55)) / 2  # seeds 0 and 1
    assert wins.measured == pytest.approx(expected) and wins.n_units == 2
    assert "d=8: seed 2 did not learn" in wins.note
    more = (math.log10(0.01 / 0.2) + math.log10(0.012 / 0.25)) / 2
    assert claims["more-heads-do-not-close-gap"].measured == pytest.approx(more)
    assert claims["full-rank-aligns"].measured == pytest.approx(0.951)  # seeds 0 and 1
    assert all(c.verdict == "PASS" for c in claims.values())


def test_rank_vs_heads_width_without_results_fails_every_finding():
    overrides = {**RANK.OVERRIDES, "d_models": [8, 16]}
    claims = _claims("amsel2024-rank-vs-heads", overrides, RANK.GOOD)
    assert all(c.verdict == "FAIL" for c in claims.values())
    assert all("d=16: missing" in c.note for c in claims.values())


def test_rank_vs_heads_grid_pairs_each_rank_with_its_head_budgets():
    config = get_experiment("amsel2024-rank-vs-heads").make_config("quick")
    assert resolve_rank("d/4", 8) == 2 and resolve_rank("d", 8) == 8
    assert grid_points(config, 8) == [(1, 8), (1, 32), (2, 4), (2, 16), (8, 1), (8, 4)]


# tiny runs ------------------------------------------------------------------------------------


def test_rank_vs_heads_runs_one_batched_unit_per_width_on_the_configured_device(run_quick):
    config, results = run_quick(
        "amsel2024-rank-vs-heads",
        {"d_models": [4], "steps": 60, "batch_size": 8, "warmup": 5, "eval_samples": 64},
    )
    final = results[results.metric == "eval_rel_mse"]
    pairs = list(zip(final.d_qk, final.n_heads, strict=True))
    assert sorted(pairs) == sorted(grid_points(config, 4) * len(config.seeds))
    assert set(results.device) == {"cpu"}


def test_encoder_run_scores_the_baselines_on_the_same_samples(run_quick):
    _, results = run_quick(
        "amsel2024-encoder",
        {"d_model": 4, "n_points": 2, "n_heads": [1, 4], "n_layers": [1], "d_ff": 8,
         "width_multipliers": [1], "steps": 10, "eval_samples": 64, "seeds": [0]},
    )  # fmt: skip
    by_metric = results.groupby("metric").value
    assert by_metric.min()["zero_rel_mse"] == by_metric.max()["zero_rel_mse"] == 1.0
    assert by_metric.max()["linear_rel_mse"] < 1e-12  # N = 2: the other point is 2 mean - x_i
    assert set(results.device) == {"cpu"}


def test_unknown_device_is_refused_before_any_unit_runs():
    with pytest.raises(ConfigError, match="device"):
        get_experiment("amsel2024-depth").make_config("quick", {"device": "tpu"})


# amsel2024-constructions ----------------------------------------------------------------------

CONSTRUCTIONS = _cases("amsel2024_constructions")


def test_constructions_findings_measure_the_hand_made_errors():
    claims = _claims("amsel2024-constructions", CONSTRUCTIONS.OVERRIDES, CONSTRUCTIONS.table())
    assert claims["full-rank-falls"].measured == pytest.approx(1.05e-4)  # mean of 1e-4, 1.1e-4
    # per seed: full rank 1e-4 (1.1e-4) against the 8-head mixture 0.4 (0.44) at d = 3
    assert claims["full-rank-beats-low-rank"].measured == pytest.approx(1e-4 / 0.4)
    assert claims["full-rank-beats-low-rank"].n_units == 2  # the seeds
    assert claims["low-rank-worsens-with-d"].measured == pytest.approx(0.63 - 0.42)
    assert claims["hardmax-exact"].kind == "check" and claims["hardmax-exact"].passed


def test_constructions_vote_is_a_check_of_the_construction_named_per_width():
    # the vote's second step is an argmax over pick counts, not attention: a check, not a finding
    good = _claims("amsel2024-constructions", CONSTRUCTIONS.OVERRIDES, CONSTRUCTIONS.table())
    vote = good["depth-vote-beats-one-layer"]
    # vote of 8 heads (0.2, 0.22 at d = 3; 0.3, 0.33 at d = 5) over one layer (0.42; 0.63)
    assert vote.kind == "check" and vote.passed
    assert vote.measured == pytest.approx(0.315 / 0.63) and "d=3: 0.5" in vote.note
    bad = CONSTRUCTIONS.table(vote_h8=(0.2, 0.7))  # with too few heads for d the vote loses
    vote = _claims("amsel2024-constructions", CONSTRUCTIONS.OVERRIDES, bad)
    assert not vote["depth-vote-beats-one-layer"].passed


def test_constructions_curve_that_rises_fails_and_is_named():
    rising = CONSTRUCTIONS.table(falls=(0.5, 1e-5, 1e-4))  # ends below 1e-3, but rose
    claim = _claims("amsel2024-constructions", CONSTRUCTIONS.OVERRIDES, rising)["full-rank-falls"]
    assert not claim.passed and claim.kind == "check" and "rises: d=4" in claim.note


def test_constructions_run_scores_every_construction(run_quick):
    config, results = run_quick(
        "amsel2024-constructions",
        {"full_rank_d_models": [4], "n_points": 4, "temperatures": [1, 100, 1e4],
         "low_rank_d_models": [3, 5], "ranks": [1], "n_heads": [1, 8], "fit_samples": 400,
         "eval_samples": 400, "seeds": [0]},
    )  # fmt: skip
    claims = {c.id: c for c in get_experiment("amsel2024-constructions").claims(config, results)}
    assert results[results.metric == "rel_mse_hardmax"].value.max() == 0.0
    assert claims["hardmax-exact"].passed and claims["full-rank-falls"].passed
    # one seed: no spread, so the beyond rows are NOT TESTED, naming what decides them
    assert claims["full-rank-beats-low-rank"].verdict == "NOT TESTED"
    assert claims["full-rank-beats-low-rank"].measured < 0.1  # the full-rank head far ahead
