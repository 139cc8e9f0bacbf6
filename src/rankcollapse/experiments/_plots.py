"""Shared figure helpers for experiments: tidy frame in, `matplotlib.figure.Figure` out.

Figures are built on `Figure` directly (never pyplot), so nothing needs a display and no
global figure state leaks between experiments. Values flagged at the floor of the dtype
that produced them are drawn as hollow grey-edged markers, never as signal.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

FLOOR_NOTE = "hollow markers: at the dtype floor (not signal)"


def ordered_values(column: pd.Series) -> list:
    """Distinct values in their categorical order, else in order of first appearance."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return [c for c in column.cat.categories if (column == c).any()]
    return list(pd.unique(column))


def _panels(
    df: pd.DataFrame,
    panel: str | None,
    *,
    sharey: bool = True,
    max_cols: int = 4,
    width: float = 4.2,
    height: float = 3.4,
):
    """One axis per value of `panel`, wrapped into rows of at most `max_cols`."""
    keys = ordered_values(df[panel]) if panel else [None]
    n_cols = min(len(keys), max_cols)
    n_rows = -(-len(keys) // n_cols)
    fig = Figure(figsize=(width * n_cols, height * n_rows), layout="constrained")
    grid = fig.subplots(n_rows, n_cols, squeeze=False, sharey=sharey)
    axes = grid.ravel()
    for ax in axes[len(keys) :]:
        ax.set_visible(False)
    for ax, key in zip(axes, keys):
        if panel:
            ax.set_title(f"{panel} = {key}", fontsize=10)
    return fig, list(zip(keys, axes))


def _style(ax, *, x: str, ylabel: str | None, logx: bool, logy: bool) -> None:
    ax.set_xlabel(x)
    if ylabel:
        ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    if logx:
        ax.set_xscale("log")
    ax.grid(True, which="major", alpha=0.3)


def band_plot(
    df: pd.DataFrame,
    *,
    x: str = "layer",
    y: str = "value",
    hue: str | None = "variant",
    panel: str | None = None,
    logy: bool = True,
    logx: bool = False,
    title: str | None = None,
    ylabel: str | None = None,
    floor_column: str | None = "at_floor",
    sharey: bool = True,
) -> Figure:
    """Mean line and a one-std band over all rows (samples, seeds) sharing `x`, per `hue`.

    One panel per value of `panel` (rows of at most four; `sharey=False` for panels of
    different quantities). At an `x` where any row is flagged in `floor_column`,
    the mean is drawn as a hollow marker and left out of the line and band: such a value
    says only "below what the dtype resolves" (on a log axis it is pinned to the bottom
    edge). On a log axis the band's lower edge is clipped to the smallest observed value,
    since mean - std can be negative.

    Example:
        >>> df = pd.DataFrame({"layer": [0, 0, 1, 1], "value": [1.0, 0.5, 1e-9, 2e-9],
        ...                    "variant": "san", "at_floor": [False, False, True, True]})
        >>> len(band_plot(df).axes)
        1
    """
    fig, panels = _panels(df, panel, sharey=sharey)
    hues = ordered_values(df[hue]) if hue else [None]
    colors = {h: f"C{i % 10}" for i, h in enumerate(hues)}
    floor_points = []  # (ax, x values, means, colour): drawn once the signal's range is known
    signal_low = {}  # axis -> smallest positive signal value drawn on it
    for key, ax in panels:
        part = df if key is None else df[df[panel] == key]
        for h in hues:
            rows = part if h is None else part[part[hue] == h]
            if rows.empty:
                continue
            floor = rows[floor_column].astype(bool) if floor_column in rows else False
            stats = (
                rows.assign(_floor=floor)
                .groupby(x, sort=True)
                .agg(mean=(y, "mean"), std=(y, "std"), low=(y, "min"), floor=("_floor", "any"))
            )
            stats["std"] = stats["std"].fillna(0.0)
            signal, at_floor = stats[~stats["floor"]], stats[stats["floor"]]
            lo = signal["mean"] - signal["std"]
            if logy:
                lo = np.maximum(lo, signal["low"])
                low = lo[lo > 0].to_numpy().min(initial=np.inf)
                signal_low[ax] = min(signal_low.get(ax, np.inf), low)
            label = None if h is None else str(h)
            ax.plot(signal.index, signal["mean"], "-o", ms=3, color=colors[h], label=label)
            ax.fill_between(
                signal.index, lo, signal["mean"] + signal["std"], color=colors[h], alpha=0.2, lw=0
            )
            if not at_floor.empty:
                floor_points.append((ax, at_floor.index, at_floor["mean"].to_numpy(), colors[h]))
        # A panel with no positive value (e.g. mean cosines < 0) cannot be log-scaled.
        panel_logy = logy and bool((part[y] > 0).any())
        _style(ax, x=x, ylabel=ylabel if ax is panels[0][1] else None, logx=logx, logy=panel_logy)
    # A floor value is only "below resolution": on a log axis it sits at the bottom edge
    # instead of stretching the axis down to 1e-70.
    # With a shared y axis every panel uses the lowest signal of all.
    shared_low = min(signal_low.values(), default=np.inf)
    for ax, xs, means, color in floor_points:
        low = shared_low if sharey else signal_low.get(ax, np.inf)
        bottom = low / 10 if logy and np.isfinite(low) else None
        ys = np.maximum(means, bottom) if bottom else means
        ax.plot(xs, ys, "o", ms=5, mfc="none", mec=color, alpha=0.7)
        if bottom:
            ax.set_ylim(bottom=bottom / 2)
    any_floor = bool(floor_points)
    if hue:
        entries = {}  # label -> handle, one per hue across all panels
        for _, ax in panels:
            for handle, label in zip(*ax.get_legend_handles_labels()):
                entries.setdefault(label, handle)
        fig.legend(
            entries.values(), entries.keys(), loc="outside right center",
            fontsize=8, title=hue, title_fontsize=8,
        )  # fmt: skip
    _suptitle(fig, title, FLOOR_NOTE if any_floor else None)
    return fig


def line_plot(
    df: pd.DataFrame,
    *,
    x: str,
    y: str = "value",
    hue: str | None = None,
    panel: str | None = None,
    logy: bool = False,
    logx: bool = False,
    title: str | None = None,
    ylabel: str | None = None,
) -> Figure:
    """One line per `hue` through the mean of `y` at each `x` (no band, no floor handling).

    Example:
        >>> df = pd.DataFrame({"k": [1, 2, 3], "value": [0.9, 0.5, 0.2]})
        >>> len(line_plot(df, x="k").axes)
        1
    """
    return band_plot(
        df.assign(_no_spread=df.groupby([c for c in (x, hue, panel) if c])[y].transform("mean")),
        x=x,
        y="_no_spread",
        hue=hue,
        panel=panel,
        logy=logy,
        logx=logx,
        title=title,
        ylabel=ylabel or y,
        floor_column=None,
    )


def heatmap(
    matrix: np.ndarray,
    *,
    xlabels: Sequence | None = None,
    ylabels: Sequence | None = None,
    xlabel: str = "",
    ylabel: str = "",
    title: str | None = None,
    cbar_label: str = "",
    log: bool = False,
) -> Figure:
    """A matrix as an image with a colour bar (log colour scale when `log`).

    Example:
        >>> len(heatmap(np.eye(3), title="identity").axes)  # the image and its colour bar
        2
    """
    from matplotlib.colors import LogNorm

    matrix = np.asarray(matrix, dtype=float)
    fig = Figure(figsize=(4.8, 4.0), layout="constrained")
    ax = fig.subplots()
    norm = LogNorm() if log else None
    image = ax.imshow(matrix, aspect="auto", origin="upper", norm=norm, interpolation="nearest")
    fig.colorbar(image, ax=ax, label=cbar_label)
    for labels, axis, set_ticks in ((xlabels, 1, ax.set_xticks), (ylabels, 0, ax.set_yticks)):
        if labels is not None:
            set_ticks(range(matrix.shape[axis]), [str(v) for v in labels], fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    _suptitle(fig, title, None)
    return fig


def _suptitle(fig: Figure, title: str | None, note: str | None) -> None:
    text = "\n".join(t for t in (title, note and f"({note})") if t)
    if text:
        fig.suptitle(text, fontsize=10)
