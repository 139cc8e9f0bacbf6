"""Figures of Wu et al. 2024's 2-D LayerNorm counterexample (the example before Thm 3)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from rankcollapse.theory import counterexample_basin_arc, counterexample_point_b


def counterexample_basin(wide: pd.DataFrame) -> Figure:
    """Final angle of token 2 against its start angle, per w, with the arc shaded.

    Rows (w, token1_angle, start_angle, final_angle): the ends of Wu et al. 2024's 2-D
    LayerNorm counterexample (before Thm 3); the arc is `counterexample_basin_arc(w)`.
    """
    ws = sorted(wide["w"].unique())
    fig = Figure(figsize=(3.4 * len(ws), 3.0), layout="constrained")
    axes = fig.subplots(1, len(ws), squeeze=False, sharey=True)[0]
    markers = "o^sDv<>"
    for ax, w in zip(axes, ws, strict=True):
        ax.axvspan(*counterexample_basin_arc(w), color="0.88", label="arc (token 1 at 90 deg)")
        for i, (token1, part) in enumerate(
            wide[wide["w"] == w].groupby("token1_angle", sort=False)
        ):
            ax.plot(
                part["start_angle"],
                part["final_angle"],
                markers[i % 7],
                ms=2,
                color=f"C{i}",
                label=f"token 1 at {token1:g} deg",
            )
        ax.set(title=f"w = {w:g}", xlabel="start angle of token 2 (deg)", xlim=(0, 360))
        ax.set_xticks(range(0, 361, 90))
    axes[0].set_ylabel("final angle of token 2 (deg)")
    axes[-1].legend(fontsize=7, markerscale=3)
    return fig


def counterexample_trajectories(traj: pd.DataFrame) -> Figure:
    """Token paths on the unit circle, drawn along the circle between consecutive layers.

    Rows (w, token1_angle, token, start_angle, layer, value = the token's angle in radians);
    one panel per (w, token 1 angle), with the point B of `counterexample_point_b(w)`.
    """
    keys = list(traj.groupby(["w", "token1_angle"]).groups)
    cols = traj["token1_angle"].nunique()
    rows = math.ceil(len(keys) / cols)
    fig = Figure(figsize=(2.4 * cols, 2.4 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    circle = np.linspace(0, 2 * np.pi, 361)
    for ax, (w, token1) in zip(axes, keys, strict=True):
        ax.plot(np.cos(circle), np.sin(circle), color="0.85", lw=0.8)
        part = traj[(traj["w"] == w) & (traj["token1_angle"] == token1)]
        starts = sorted(part["start_angle"].unique())
        for (token, start), path in part.groupby(["token", "start_angle"]):
            # A token moves along the circle: unwrap the angle (each step is the shorter way
            # round) and draw it densely between the stored layers, never as a chord. Token 2's
            # paths sit on staggered radii inside the circle so that they do not hide each other.
            theta = np.unwrap(path.sort_values("layer")["value"].to_numpy())
            theta = np.interp(
                np.linspace(0, len(theta) - 1, 20 * len(theta)), np.arange(len(theta)), theta
            )
            radius = 1.0 if token == 1 else 0.95 - 0.5 * starts.index(start) / len(starts)
            color = "black" if token == 1 else "C0"
            x, y = radius * np.cos(theta), radius * np.sin(theta)
            ax.plot(x, y, "-", lw=0.7, color=color, alpha=0.7)
            ax.plot(x[0], y[0], "o", ms=2.5, mfc="none", color=color)  # start
            ax.plot(x[-1], y[-1], "o", ms=2.5, color=color)  # end
        ax.plot(*counterexample_point_b(w).cpu().numpy(), "*", color="C3", ms=8)
        ax.set_title(f"w = {w:g}, token 1 at {token1:g} deg", fontsize=8)
        ax.set(aspect="equal", xticks=[], yticks=[])
    for ax in axes[len(keys) :]:
        ax.set_visible(False)
    fig.suptitle(
        "With LN: token 1 (black), token 2 (blue, one radius per start);\n"
        "open dot: start, filled dot: end, star: B",
        fontsize=9,
    )
    return fig
