import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from rankcollapse.errors import ConfigError
from rankcollapse.experiments import get_experiment
from rankcollapse.tasks import rollout

sys.path.insert(0, str(Path(__file__).parent / "cases"))
from dong2021_circle import STAY, run, table, variant

EXP = get_experiment("dong2021-circle")


def _claims(results: pd.DataFrame, **overrides) -> dict:
    config = EXP.make_config("quick", overrides)
    return {c.id: c for c in EXP.claims(config, results)}


def test_the_cpu_preset_keeps_the_authors_layer_and_data_and_trains_longer_on_a_schedule():
    cpu, paper = EXP.make_config("cpu"), EXP.make_config("paper")
    assert cpu.schedule == "cosine" and cpu.warmup > 0 and cpu.steps >= 10 * paper.steps
    kept = ("n_points", "radius", "d_model", "n_heads", "batch_size", "n_steps", "variants")
    assert all(getattr(cpu, key) == getattr(paper, key) for key in kept)
    # about 5 ms a step on one core: within half an hour on 2 cores, with room for a busy machine
    assert len(cpu.variants) * len(cpu.seeds) * cpu.steps <= 150_000
    assert "The cpu preset" in sys.modules[EXP.run_unit.__module__].__doc__  # its departures


def test_merges_count_only_runs_whose_fit_beats_predicting_the_input():
    # Two runs merge; the first fit is worse than predicting the input (not learned).
    results = table(
        run("san", 0, 1e-6, mse=3 * STAY), run("san", 1, 1e-6, mse=0.5 * STAY), run("san", 2, 0.9)
    )
    claim = _claims(results, variants=["san"])["pure-merges"]
    assert claim.measured == pytest.approx(1 / 2) and claim.verdict == "PASS"  # 1 of 2 learned
    assert "seed 0: train MSE 6.00e-06 vs input 2.00e-06 (not learned)" in claim.note
    assert "seed 1: train MSE 1.00e-06 vs input 2.00e-06, distance x1e-06" in claim.note


def test_an_untrained_layer_that_merges_supports_no_finding():
    merged_unlearned = variant("san", [1e-8, 1e-8, 1e-8], mse=10 * STAY)
    claim = _claims(merged_unlearned, variants=["san"])["pure-merges"]
    assert claim.verdict == "NOT TESTED" and claim.untested.startswith("not learned: 0 of 3")
    apart_unlearned = variant("san+skip", [1.0, 1.0, 1.0], mse=10 * STAY)
    claim = _claims(apart_unlearned, variants=["san+skip"])["skip-keeps-apart"]
    assert claim.verdict == "NOT TESTED"


def test_a_diverged_or_missing_run_never_counts_as_kept_apart():
    results = table(run("san+skip", 0, 50.0, diverged=True), run("san+skip", 1, 0.9))
    claim = _claims(results, variants=["san+skip"], seeds=[0, 1, 2])["skip-keeps-apart"]
    assert claim.measured == pytest.approx(1 / 2) and claim.verdict == "PASS"  # seed 2 missing
    claim = _claims(results, variants=["san+skip"], seeds=[0, 1, 2, 3, 4])["skip-keeps-apart"]
    assert claim.verdict == "NOT TESTED"  # three of five seeds missing: fewer than half learned
    assert "seed 0: train MSE 1.00e-07 vs input 2.00e-06, diverged" in claim.note
    assert "seed 2: missing" in claim.note


def test_kept_apart_needs_a_final_distance_between_half_and_twice_the_start():
    claims = _claims(variant("san+mlp", [0.51, 0.49, 1.99, 2.01]), variants=["san+mlp"],
                     seeds=[0, 1, 2, 3])  # fmt: skip
    assert claims["mlp-keeps-apart"].measured == pytest.approx(2 / 4)


def test_a_unit_records_trajectories_and_the_runs_table_its_outcome(run_quick):
    overrides = {"n_points": 16, "d_model": 4, "steps": 3, "n_steps": 5, "seeds": [0]}
    config, rows = run_quick(EXP.name, overrides)
    start = rows[(rows["step"] == 0) & (rows["metric"] == "distance")]["value"]
    expected = 2 * 0.3 * np.cos(np.pi / 16)  # p_0 and p_7 of 16 points: one step short of opposite
    assert np.allclose(start, expected, atol=1e-6) and len(start) == 3
    assert set(rows["device"]) == {"cpu"}
    distance = rows[rows["metric"] == "distance"].set_index(["variant", "step"])["value"]
    finals = rows[rows["metric"] == "relative_final_distance"].set_index("variant")["value"]
    for name in ("san", "san+skip", "san+mlp"):
        assert finals[name] == pytest.approx(distance[name, 5] / distance[name, 0])
    summary = EXP.summarize(config, rows)
    runs = summary.tables["runs: fit, final distance and outcome"].set_index("variant")
    assert (runs["learned"] == (runs["train_mse"] < runs["baseline_mse_stay"])).all()
    assert set(summary.figures) == {"token trajectories", "token distance over the recurrent steps"}


def test_a_diverging_start_stops_and_leaves_nan_while_the_others_go_on():
    starts = torch.stack([torch.ones(2, 2), torch.zeros(2, 2)])  # the second never moves
    trajectory = rollout(lambda points: 2 * points, starts, 20, radius=1.0)
    assert trajectory.shape == (21, 2, 2, 2)
    assert np.isfinite(trajectory[:7, 0]).all() and np.isnan(trajectory[7:, 0]).all()
    assert np.array_equal(trajectory[3, 0], np.full((2, 2), 8.0))
    assert np.array_equal(trajectory[:, 1], np.zeros((21, 2, 2)))


def test_bad_settings_get_clear_errors():
    with pytest.raises(ConfigError, match="variants"):
        EXP.make_config("quick", {"variants": ["pure"]})
    with pytest.raises(ConfigError, match="device"):
        EXP.make_config("quick", {"device": "gpu"})
