"""The circle experiment's share figure draws what its findings read."""

import math

import pandas as pd
from matplotlib.colors import to_rgba

from rankcollapse.plot import circle_shares


def test_each_run_is_a_marker_filled_when_learned_with_the_mean_and_the_majority():
    shares = pd.DataFrame(
        {
            "variant": ["san"] * 3,
            "seed": [0, 1, 2],
            "outcome": "merged",
            "learned": [True, True, False],
            "share": [0.25, 1.0, 0.5],
        }
    )
    figure = circle_shares(shares, {"san": (0.625, 0.375)}, labels={"san": "pure"}, majority=0.5)
    (ax,) = figure.axes
    lines = ax.get_lines()
    filled, hollow = lines[0], lines[1]
    assert list(filled.get_ydata()) == [0.25, 1.0] and to_rgba(filled.get_mfc())[3] == 1
    assert list(hollow.get_ydata()) == [0.5] and hollow.get_mfc() == "none"
    assert [line.get_ydata()[0] for line in lines[2:]] == [0.625, 0.5]  # mean, majority
    (band,) = ax.patches  # one standard error around the mean
    assert math.isclose(band.get_y(), 0.25) and math.isclose(band.get_y() + band.get_height(), 1.0)
    assert ax.get_title() == "pure: share merged\n(2 of 3 learned)"


def test_many_seeds_get_a_few_seed_labels_and_the_first_seeds_trajectories():
    from rankcollapse.plot import circle_trajectories
    from rankcollapse.plot.circle import SEED_TICKS, TRAJECTORY_SEEDS

    seeds = list(range(60))
    shares = pd.DataFrame({"variant": "san", "seed": seeds, "outcome": "merged",
                           "learned": True, "share": 0.5})  # fmt: skip
    (ax,) = circle_shares(shares, {"san": (0.5, 0.1)}, labels={"san": "pure"}, majority=0.5).axes
    assert list(ax.get_xticks()) == seeds[::5] and len(ax.get_xticks()) <= SEED_TICKS
    rows = [
        {"variant": "san", "seed": s, "token": t, "step": k, "metric": m, "value": float(k)}
        for s in seeds for t in (0, 1) for k in (0, 1) for m in ("x", "y")
    ]  # fmt: skip
    table = pd.DataFrame({"variant": "san", "seed": seeds, "learned": True, "diverged": False,
                          "merged": True})  # fmt: skip
    figure = circle_trajectories(pd.DataFrame(rows), table, variants=["san"],
                                 labels={"san": "pure"}, radius=0.3, n_steps=1)  # fmt: skip
    assert len(figure.axes) == TRAJECTORY_SEEDS
    assert figure.get_suptitle().endswith(f"the first {TRAJECTORY_SEEDS} of 60 seeds)")
