"""Curves against layer, one panel per attention mask (Wu et al. 2024, Sec. 4)."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from rankcollapse.plot.curves import band_plot

LOG_LAYERS = 16  # deeper curves get a log layer axis (with fewer layers: only minor ticks)


def mask_panels(
    rows: pd.DataFrame,
    *,
    hue: str,
    ylabel: str,
    title: str,
    floor_column: str | None = "at_floor",
) -> Figure:
    """Per-layer band plot of `value`, one panel per `mask`, one series per `hue`, log y.

    Curves deeper than `LOG_LAYERS` layers get a log layer axis too, with layer 0 drawn at 1
    (the title says so).
    """
    deep = rows["layer"].max() > LOG_LAYERS
    return band_plot(
        rows.assign(layer=rows["layer"].clip(lower=1) if deep else rows["layer"]),
        hue=hue,
        panel="mask",
        logx=deep,
        logy=True,
        floor_column=floor_column,
        ylabel=ylabel,
        title=title + (" (layer 0 drawn at 1)" if deep else ""),
    )
