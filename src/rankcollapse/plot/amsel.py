"""Figures of Amsel et al. 2024's constructions: one full-rank head against random low-rank
heads on the nearest-neighbour task (Fact 1, Thm 2); rank-1 heads with depth (Thm 5,
Conjecture 6)."""

from __future__ import annotations

from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from rankcollapse.plot.curves import band_plot, line_plot


def construction_figures(
    full: pd.DataFrame, mixtures: pd.DataFrame, *, n_points: int
) -> dict[str, Figure]:
    """Relative MSE of the full-rank head against the temperature (one line per width, `d`
    column) and of fitted random low-rank heads against their number H (one line per
    `heads` column, d and r).
    """
    common: dict[str, Any] = {"logx": True, "floor_column": None, "ylabel": "relative MSE"}
    title = f"Full-rank head, N={n_points}: relative MSE vs temperature"
    return {
        "full_rank_vs_temperature": band_plot(
            full, x="temperature", hue="d", logy=True, title=title, **common
        ),
        "low_rank_vs_heads": band_plot(
            mixtures,
            x="n_heads",
            hue="heads",
            logy=False,
            title="Random low-rank heads, fitted, N=2: error vs H",
            **common,
        ),
    }


def depth_figures(
    final: pd.DataFrame,
    curves: pd.DataFrame,
    *,
    d_model: int,
    n_layers: list[int],
    positions: int = 0,
) -> dict[str, Figure]:
    """Held-out error against the number of layers (one line per `model` column: rank and N)
    and the training loss curves (one panel per `context`), to judge convergence; `positions`
    scratch dimensions widen the layers to d + positions (rank-1 heads: H = d + positions).
    """
    width = f"d={d_model}" + (f" + {positions} scratch" if positions else "")
    figures = {
        "error_vs_layers": band_plot(
            final,
            x="n_layers",
            hue="model",
            logy=True,
            floor_column=None,
            title=f"{width}: rank-1 heads (H = width) vs one full-rank head (1 layer)",
            ylabel="held-out relative MSE (zero predictor: 1)",
        ),
        "loss_curves": line_plot(
            curves,
            x="step",
            hue="model",
            panel="context",
            logy=True,
            title="Training loss (mean over seeds): has each run converged?",
            ylabel="training relative MSE",
        ),
    }
    for ax in figures["error_vs_layers"].axes:  # integer ticks on an integer axis
        ax.set_xticks(n_layers)
        ax.set_xlabel("layers")
    return figures
