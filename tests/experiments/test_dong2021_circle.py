import numpy as np
import torch

from rankcollapse.experiments import get_experiment
from rankcollapse.experiments.dong2021_circle import rollout

EXP = get_experiment("dong2021-circle")


def test_circle_units_record_trajectories_and_the_summary_measures_final_distances():
    config = EXP.make_config(
        "quick",
        {
            "n_points": 16,
            "d_model": 4,
            "steps": 3,
            "n_ahead": 2,
            "n_steps": 5,
            "n_starts": 4,
            "seeds": [0],
        },
    )
    rows = __import__("pandas").concat(
        [EXP.run_unit(config, unit) for unit in EXP.units(config)], ignore_index=True
    )
    start = rows[(rows["step"] == 0) & (rows["metric"] == "distance")]["value"]
    assert np.allclose(start, 0.6, atol=1e-6)  # opposite points of a circle of radius 0.3
    finals = rows[rows["metric"] == "relative_final_distance"]
    assert len(finals) == 3 * 4 and (finals["value"] >= 0).all()
    summary = EXP.summarize(config, rows)
    assert [c.id for c in summary.claims] == ["pure-merges", "skip-keeps-apart", "mlp-keeps-apart"]
    assert "token trajectories" in summary.figures


def test_a_diverging_start_stops_and_leaves_nan_while_the_others_go_on():
    doubling = lambda points: 2 * points
    starts = torch.stack([torch.ones(2, 2), torch.zeros(2, 2)])  # the second never moves
    trajectory = rollout(doubling, starts, 20, radius=1.0)
    assert trajectory.shape == (21, 2, 2, 2)
    assert np.isfinite(trajectory[:7, 0]).all() and np.isnan(trajectory[7:, 0]).all()
    assert np.array_equal(trajectory[3, 0], np.full((2, 2), 8.0))
    assert np.array_equal(trajectory[:, 1], np.zeros((21, 2, 2)))
