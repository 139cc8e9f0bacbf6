import numpy as np
import pandas as pd
import torch

from rankcollapse.experiments import get_experiment
from rankcollapse.experiments.dong2021_circle import rollout

EXP = get_experiment("dong2021-circle")


def test_circle_units_record_trajectories_and_the_summary_measures_final_distances():
    config = EXP.make_config(
        "quick", {"n_points": 16, "d_model": 4, "steps": 3, "n_steps": 5, "seeds": [0, 1]}
    )
    rows = pd.concat([EXP.run_unit(config, unit) for unit in EXP.units(config)], ignore_index=True)
    start = rows[(rows["step"] == 0) & (rows["metric"] == "distance")]["value"]
    expected = 2 * 0.3 * np.cos(np.pi / 16)  # p_0 and p_7 of 16 points: one step short of opposite
    assert np.allclose(start, expected, atol=1e-6) and len(start) == 3 * 2
    finals = rows[rows["metric"] == "relative_final_distance"]
    assert len(finals) == 3 * 2 and (finals["value"] >= 0).all()
    summary = EXP.summarize(config, rows)
    assert [c.id for c in summary.claims] == ["pure-merges", "skip-keeps-apart", "mlp-keeps-apart"]
    table = summary.tables["final distance and fit per variant"].set_index("variant")
    merged = (finals.set_index("variant")["value"] < 0.1).groupby("variant").mean()
    assert summary.claims[0].measured == merged["pure"] == table.loc["pure", "share_merged"]
    assert "token trajectories" in summary.figures


def test_a_diverged_run_never_counts_as_kept_apart():
    config = EXP.make_config("quick", {"variants": ["skip"], "seeds": [0, 1]})
    rows = pd.DataFrame(
        [
            ("skip", 0, np.nan, np.nan, "relative_final_distance", 50.0),
            ("skip", 0, np.nan, np.nan, "diverged", 1.0),
            ("skip", 1, np.nan, np.nan, "relative_final_distance", 0.9),
            ("skip", 1, np.nan, np.nan, "diverged", 0.0),
        ]
        + [("skip", s, np.nan, np.nan, "train_mse", 1e-6) for s in (0, 1)]
        + [("skip", s, np.nan, np.nan, "baseline_mse_centre", 0.045) for s in (0, 1)]
        + [("skip", s, np.nan, np.nan, "baseline_mse_stay", 2e-6) for s in (0, 1)]
        + [
            ("skip", s, step, token, axis, 0.3 * (token - 0.5))
            for s in (0, 1)
            for step in (0, 1)
            for token in (0, 1)
            for axis in ("x", "y")
        ],
        columns=["variant", "seed", "step", "token", "metric", "value"],
    )
    (claim,) = EXP.summarize(config, rows).claims
    assert claim.id == "skip-keeps-apart" and claim.measured == 0.5 and claim.passed
    assert "50% diverged (counted as not kept apart)" in claim.note


def test_a_diverging_start_stops_and_leaves_nan_while_the_others_go_on():
    doubling = lambda points: 2 * points
    starts = torch.stack([torch.ones(2, 2), torch.zeros(2, 2)])  # the second never moves
    trajectory = rollout(doubling, starts, 20, radius=1.0)
    assert trajectory.shape == (21, 2, 2, 2)
    assert np.isfinite(trajectory[:7, 0]).all() and np.isnan(trajectory[7:, 0]).all()
    assert np.array_equal(trajectory[3, 0], np.full((2, 2), 8.0))
    assert np.array_equal(trajectory[:, 1], np.zeros((21, 2, 2)))
