import numpy as np
import torch

from rankcollapse.experiments import get_experiment
from rankcollapse.experiments.dong2021_circle import rollout

EXP = get_experiment("dong2021-circle")


def test_circle_units_record_trajectories_and_the_summary_measures_final_distances():
    config = EXP.make_config(
        "quick", {"n_points": 16, "d_model": 4, "steps": 3, "n_steps": 5, "seeds": [0]}
    )
    rows = __import__("pandas").concat(
        [EXP.run_unit(config, unit) for unit in EXP.units(config)], ignore_index=True
    )
    start = rows[(rows["step"] == 0) & (rows["metric"] == "distance")]["value"]
    assert np.allclose(start, 0.6, atol=1e-6)  # opposite points of a circle of radius 0.3
    summary = EXP.summarize(config, rows)
    assert [c.id for c in summary.claims] == ["pure-merges", "skip-keeps-apart", "mlp-keeps-apart"]
    assert "token trajectories" in summary.figures


def test_a_diverging_rollout_stops_and_leaves_nan():
    doubling = lambda points: 2 * points  # noqa: E731
    trajectory = rollout(doubling, torch.ones(1, 2, 2), 20, radius=1.0)
    assert np.isfinite(trajectory[:7]).all() and np.isnan(trajectory[8:]).all()
    assert np.array_equal(trajectory[3], np.full((2, 2), 8.0))
