"""Curves of a tidy frame against one column: tidy frame in, `matplotlib.figure.Figure` out.

Figures are built on `Figure` directly (never pyplot), so nothing needs a display and no
global figure state leaks between callers; nothing here reads or writes a file.

Spread: on a log axis the band runs from the 10th to the 90th percentile of the rows at each
x (mean - std can be negative there); on a linear axis it is mean +- one standard deviation.
Floor: at an x where any row is flagged at the floor of its dtype, no mean is drawn (it
would mix rounding noise with signal). A hollow triangle sits at the dtype's floor value
instead (at the bottom of the axis when the floor value is not known), labelled with the
share of rows at the floor when only some are; the rows above the floor are drawn as dots.
"""

from __future__ import annotations

import itertools
import textwrap
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd
from matplotlib import ticker, transforms
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from rankcollapse.frames import as_names, check_frame
from rankcollapse.plot.floor import Floor, floor_of
from rankcollapse.plot.style import (
    FLOOR_COLOR,
    MAX_SERIES,
    PANEL_HEIGHT,
    RC,
    context,
    fraction,
    fractions_in,
    integer_axis,
    is_integer_valued,
    lay_out,
    log_axis,
    new_figure,
    prepare_figure,
    series_style,
    words,
)

Band = Literal["auto", "quantile", "std"] | None
QUANTILES = (0.1, 0.9)
# Metrics that shrink towards zero as tokens collapse: drawn on a log axis by `layers`.
SHRINKING = {
    "res_comp_rel",
    "res_comp",
    "mu_rel",
    "mu",
    "rank1_rel",
    "min_sv",
    "min_sv_rel",
    "attn_dist_uniform",
}
# Metrics in the units of the states (`METRICS[name].relative` is set): a relative dtype floor
# is no value on their axis, so their floor markers sit at the axis bottom and no floor line.
ABSOLUTE = {"res_comp", "mu", "min_sv"}
# Metrics that never sit at a floor (means of cosines, ranks): always a linear axis.
BOUNDED = {
    "cos_mean",
    "abs_cos_mean",
    "stable_rank",
    "effective_rank",
    "numerical_rank",
    "attn_entropy",
    "attn_min_edge",
}


def ordered_values(column: pd.Series) -> list:
    """Distinct values in their categorical order, else in order of first appearance.

    Example:
        >>> ordered_values(pd.Series(["b", "a", "b"]))
        ['b', 'a']
    """
    if isinstance(column.dtype, pd.CategoricalDtype):
        return [c for c in column.cat.categories if (column == c).any()]
    return list(pd.unique(column))


def _series_label(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, (float, np.floating)):
        return fraction(float(value))
    return fractions_in(str(value))


def _draw_panel(
    ax,
    rows: pd.DataFrame,
    *,
    x: str,
    y: str,
    hue: str | None,
    hues: list,
    logy: bool,
    band: Band,
    floor_column: str | None,
    floor: Floor,
) -> None:
    """Every series of one panel: mean line (gaps at floor x), spread band, floor markers."""
    band = ("quantile" if logy else "std") if band == "auto" else band
    for i, h in enumerate(hues):
        part = rows if h is None else rows[rows[hue] == h]
        if part.empty:
            continue
        style = series_style(i)
        flags = part[floor_column].astype(bool) if floor_column and floor_column in part else None
        part = part.assign(_floor=False if flags is None else flags)
        groups = part.groupby(x, sort=True)
        # three plain reductions: a named aggregation, agg(mean=(y, "mean"), ...), gives the
        # same table in 4x the time
        stats = pd.DataFrame(
            {"mean": groups[y].mean(), "n": groups.size(), "k": groups["_floor"].sum()}
        )
        clean = stats["k"] == 0
        mean = stats["mean"].where(clean)  # NaN breaks the line at floor layers
        ax.plot(stats.index, mean, label=_series_label(h), markevery=_every(len(stats)), **style)
        if band == "quantile":
            low, high = (groups[y].quantile(q).where(clean) for q in QUANTILES)
        elif band == "std":
            std = groups[y].std().fillna(0.0).where(clean)
            low, high = mean - std, mean + std
        if band is not None and (stats["n"] > 1).any():
            ax.fill_between(stats.index, low, high, color=style["color"], alpha=0.18, lw=0)
        floored = stats[~clean]
        if not floored.empty:
            above = part[part[x].isin(floored.index) & ~part["_floor"]]
            if not above.empty:
                ax.plot(above[x], above[y], ".", ms=2.5, color=style["color"], alpha=0.5)
            floor.points.append(
                (ax, floored.index, floored["k"].to_numpy(), floored["n"].to_numpy(), style)
            )


def _every(n_points: int) -> int:
    """Markers on at most about 12 points of a line, so dense curves stay legible."""
    return max(1, n_points // 12)


def _place_floor_points(fig: Figure, floor: Floor, axes: list, *, logy: bool) -> None:
    if not floor.points:
        return
    if floor.value is not None:
        at = floor.value
    else:  # below everything drawn: "less than the dtype resolves", not a value
        lows = [ax.get_ylim()[0] for ax in axes]
        at = min(lows) / 3 if logy else min(lows)
    per_axis: dict[int, int] = {}
    ranks = []  # the series' place among those at the floor in its axis
    for ax, *_ in floor.points:
        ranks.append(per_axis.get(id(ax), 0))
        per_axis[id(ax)] = ranks[-1] + 1
    for (ax, xs, k, n, style), rank in zip(floor.points, ranks, strict=True):
        # Side by side, a few points apart, so series at the floor at one x stay visible.
        slot = rank - (per_axis[id(ax)] - 1) / 2
        shift = transforms.offset_copy(ax.transData, fig=fig, x=3.5 * slot, units="points")
        ax.plot(
            xs,
            np.full(len(xs), at),
            "v",
            ms=4.5,
            mfc="none",
            mec=style["color"],
            mew=1.0,
            linestyle="none",
            clip_on=False,
            transform=shift,
        )
        partial_before = False
        for xv, ki, ni in zip(xs, k, n, strict=True):
            # Label the first x of each run of partial floors only, so labels never pile up.
            if ki < ni and not partial_before:
                label = ax.annotate(
                    f"{ki}/{ni}",
                    (xv, at),
                    xytext=(3.5 * slot, 6 + 7 * rank),
                    textcoords="offset points",
                    ha="center",
                    fontsize=5.5,
                    color=style["color"],
                    gid=SHARE_LABEL,
                )
                label.set_in_layout(False)  # laid out by `_spread_share_labels`
            partial_before = ki < ni
    for ax in {id(p[0]): p[0] for p in floor.points}.values():  # once per axis
        low, high = ax.get_ylim()
        if at <= low:
            ax.set_ylim(at / 2 if logy else at - 0.05 * (high - at), high)
        if floor.value is not None and logy:
            ax.axhline(floor.value, color=FLOOR_COLOR, lw=0.6, ls=(0, (1, 2)), zorder=0)


SHARE_LABEL = "floor-share"  # gid of the k/n labels of floor markers
SHARE_STEP = 6.5  # pt: one label height (5.5 pt font) between tried places
SHARE_TRIES = 4  # places tried upwards before a label that would collide is left out


def _spread_share_labels(fig: Figure) -> None:
    """Lay out the k/n labels of the floor markers so that no two overlap: once the figure is
    laid out, each label (left to right) takes the lowest of SHARE_TRIES places above its
    marker where it collides with no label already placed; a label with no free place is left
    out (its marker and the legend's "k/n: share of rows" stay)."""
    from matplotlib.text import Annotation

    # ax.texts, not fig.findobj: that walk creates every axis's ticks (40 % of a 12-panel figure)
    labels = [
        t
        for ax in fig.axes
        for t in ax.texts
        if isinstance(t, Annotation) and t.get_gid() == SHARE_LABEL
    ]
    if len(labels) < 2:
        return
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = fig.canvas if hasattr(fig.canvas, "get_renderer") else FigureCanvasAgg(fig)
    lay_out(fig)  # where every axes is drawn (the labels are not part of the layout)
    renderer = canvas.get_renderer()
    placed: list[transforms.Bbox] = []
    for label in sorted(labels, key=lambda a: (a.get_window_extent(renderer).x0, a.xyann[1])):
        dx, dy = label.xyann
        for step in range(SHARE_TRIES):
            label.xyann = (dx, dy + step * SHARE_STEP)
            box = label.get_window_extent(renderer).expanded(1.05, 1.0)
            if not any(box.overlaps(other) for other in placed):
                placed.append(box)
                break
        else:
            label.remove()


def _finish_axes(
    ax,
    values: pd.Series,
    *,
    x: str,
    logx: bool,
    logy: bool,
    ylabel: str | None,
    y_values: pd.Series,
) -> None:
    ax.set_xlabel(words(x))
    if ylabel:
        ax.set_ylabel(fractions_in(ylabel))
    if logy:
        log_axis(ax, "y")
    elif is_integer_valued(y_values):
        ax.yaxis.set_major_locator(ticker.MaxNLocator(integer=True, nbins=6))
    if is_integer_valued(values):
        integer_axis(ax, "x", values.dropna().unique(), log=logx)
    elif logx:
        log_axis(ax, "x")


def _legend(fig: Figure, axes: list, title: str | None, floor: Floor, band: str | None) -> None:
    entries: dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            entries.setdefault(label, handle)
    if floor.points:
        where = "" if floor.value is not None else " (drawn at the bottom)"
        entries[f"{floor.label}{where}; k/n: share of rows"] = Line2D(
            [], [], marker="v", ls="none", mfc="none", mec=FLOOR_COLOR
        )
    if band:
        text = (
            f"band: {QUANTILES[0]:.0%} to {QUANTILES[1]:.0%} of rows"
            if band == "quantile"
            else "band: mean +- 1 std"
        )
        entries[text] = Line2D([], [], color=FLOOR_COLOR, alpha=0.3, lw=6)
    if entries:
        width = fig.get_figwidth() * 72 - ENTRY_GAP
        labels = [_wrap(label, width, RC["legend.fontsize"]) for label in entries]
        n_cols = _legend_columns(fig, labels)
        fig.legend(entries.values(), labels, loc="outside lower center", ncols=n_cols, title=title)
        # the legend gets its own height: the panels keep theirs, never a third of the figure
        fig.set_figheight(fig.get_figheight() + _legend_height(labels, n_cols, title) / 72)


def _legend_height(labels: list[str], n_cols: int, title: str | None) -> float:
    r"""Points a legend of `labels` in `n_cols` columns takes (its tallest column, dealt as
    matplotlib deals entries: the first len % n columns one entry longer), with its title.

    Example:
        >>> round(_legend_height(["a", "b", "c\nd"], 2, None))
        33
    """
    size = RC["legend.fontsize"]
    counts = [len(labels) // n_cols + (i < len(labels) % n_cols) for i in range(n_cols)]
    starts = np.cumsum([0, *counts])
    tallest = max(
        sum(1.2 * size * label.count("\n") + 1.7 * size for label in labels[a:b])
        for a, b in itertools.pairwise(starts)
    )
    return tallest + (1.7 * RC["legend.title_fontsize"] if title else 0) + size


CHAR_WIDTH = 0.6  # em: a wide average glyph of the sans-serif font (measured 0.46-0.52)
ENTRY_GAP = 30  # pt: a legend entry's marker and the gap after it


def _wrap(text: str, width: float, fontsize: float) -> str:
    r"""`text` wrapped to lines that fit `width` points at `fontsize`; math between $ signs is
    never broken (a broken formula is shown as its raw TeX).

    Example:
        >>> _wrap("smallest $\\sigma_{min} / \\sigma_{max}$ ratio", 60, 8.5)
        'smallest\n$\\sigma_{min} / \\sigma_{max}$\nratio'
    """
    pieces = text.split("$")
    glued = "$".join(p.replace(" ", "\0") if i % 2 else p for i, p in enumerate(pieces))
    lines = textwrap.fill(glued, int(width / (CHAR_WIDTH * fontsize)), break_long_words=False)
    return lines.replace("\0", " ")


def _legend_columns(fig: Figure, labels: list[str]) -> int:
    """At most 3 legend columns, as many as fit the figure's width. Entries fill the columns
    top to bottom, the first len % n columns one entry longer (as matplotlib deals them), and
    each column is as wide as its longest line."""
    width = fig.get_figwidth() * 72
    for n in range(min(len(labels), 3), 1, -1):
        sizes = [len(labels) // n + (i < len(labels) % n) for i in range(n)]
        starts = np.cumsum([0, *sizes])
        longest = [
            max(len(line) for label in labels[a:b] for line in label.splitlines())
            for a, b in itertools.pairwise(starts)
        ]
        if sum(CHAR_WIDTH * RC["legend.fontsize"] * k + ENTRY_GAP for k in longest) <= width:
            return n
    return 1


def _outer_labels(axes: list, values: pd.Series, *, logx: bool) -> None:
    """x limits from all the data (floor markers included); the x label and tick labels on
    the lowest panel of each column (above an empty cell too), on no other."""
    finite = pd.to_numeric(values, errors="coerce").dropna()
    if not finite.empty and not logx:
        low, high = finite.min(), finite.max()
        pad = 0.04 * (high - low) if high > low else 0.5
        axes[0].set_xlim(low - pad, high + pad)
    lowest: dict[int, Any] = {}
    for ax in axes:
        spec = ax.get_subplotspec()
        column = spec.colspan.start
        if (
            column not in lowest
            or spec.rowspan.start > lowest[column].get_subplotspec().rowspan.start
        ):
            lowest[column] = ax
    for ax in axes:
        bottom = ax is lowest[ax.get_subplotspec().colspan.start]
        if not bottom:
            ax.set_xlabel("")
        ax.tick_params(labelbottom=bottom)


def _suptitle(fig: Figure, title: str | None) -> None:
    """The title, wrapped to the figure's width (a column-wide figure clipped long titles)."""
    if title:
        fig.suptitle(_wrap(fractions_in(title), fig.get_figwidth() * 72, RC["figure.titlesize"]))


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
    band: Band = "auto",
    floor: Any = None,
) -> Figure:
    """Mean line and spread band of `y` over all rows sharing `x`, one series per `hue`.

    One panel per value of `panel` (`sharey=False` for panels of different quantities); more
    than MAX_SERIES series and no `panel` become small multiples, one panel per series.
    Spread and floor markers as in the module docstring; `floor` is the dtype (or value) of
    the floor that `floor_column` flags.

    Example:
        >>> df = pd.DataFrame({"layer": [0, 0, 1, 1], "value": [1.0, 0.5, 1e-9, 2e-9],
        ...                    "variant": "san", "at_floor": [False, False, True, True]})
        >>> len(band_plot(df).axes)
        1
    """
    named = [c for c in (hue, panel) if c]
    needed = [x, y, *named]
    how = f"pass a frame with a row per point and the columns x, y, hue and panel name: {needed}"
    check_frame(df, needed, [y], how)
    hues = ordered_values(df[hue]) if hue else [None]
    if panel is None and len(hues) > MAX_SERIES:
        panel, hue, hues = hue, None, [None]
    keys = ordered_values(df[panel]) if panel else [None]
    mark = floor_of(floor)
    with context():
        xs = [set(df[x] if key is None else df.loc[df[panel] == key, x]) for key in keys]
        sharex = all(v == xs[0] for v in xs)  # panels over different x keep their own axis
        fig, axes = new_figure(len(keys), sharex=sharex, sharey=sharey)
        for key, ax in zip(keys, axes, strict=True):
            rows = df if key is None else df[df[panel] == key]
            panel_logy = _log_scale(rows, y, logy, floor_column)
            _draw_panel(
                ax,
                rows,
                x=x,
                y=y,
                hue=hue,
                hues=hues,
                logy=panel_logy,
                band=band,
                floor_column=floor_column,
                floor=mark,
            )
            if panel and key is not None:  # keys are [None] when there is no panel
                ax.set_title(_panel_title(panel, key))
        for i, (key, ax) in enumerate(zip(keys, axes, strict=True)):
            rows = df if key is None else df[df[panel] == key]
            left = sharey is False or i % _n_cols(fig) == 0
            _finish_axes(
                ax,
                rows[x],
                x=x,
                logx=logx,
                logy=_log_scale(rows, y, logy, floor_column),
                ylabel=ylabel if left else None,
                y_values=rows[y],
            )
        _place_floor_points(fig, mark, axes, logy=logy)
        if sharex:
            _outer_labels(axes, df[x], logx=logx)
        shown = band if band != "auto" else ("quantile" if logy else "std")
        spread = shown if (df.groupby([c for c in (x, hue, panel) if c]).size() > 1).any() else None
        _legend(fig, axes, words(hue) if hue else None, mark, spread)
        _suptitle(fig, title)
        _spread_share_labels(fig)
    return fig


def _log_scale(rows: pd.DataFrame, y: str, logy: bool, floor_column: str | None) -> bool:
    """A log y axis when asked for and some positive value is drawn as signal (not at the
    floor): a panel with nothing on it cannot be log scaled."""
    signal = rows[y] > 0
    if floor_column and floor_column in rows:
        signal &= ~rows[floor_column].astype(bool)
    return logy and bool(signal.any())


def _n_cols(fig: Figure) -> int:
    spec = fig.axes[0].get_subplotspec() if fig.axes else None  # new_figure's: a subplot's
    return spec.get_gridspec().ncols if spec is not None else 1


def _panel_title(panel: str, key: Any) -> str:
    if panel in ("metric", "panel"):
        return words(key)
    return f"{words(panel)} = {_series_label(key)}"


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
        df,
        x=x,
        y=y,
        hue=hue,
        panel=panel,
        logy=logy,
        logx=logx,
        title=title,
        ylabel=ylabel or words(y),
        floor_column=None,
        band=None,
    )


ID_COLUMNS = ("run", "model", "init", "variant", "mask", "temperature", "mode", "arm")


def layers(
    frame: pd.DataFrame,
    *,
    metric: str | Sequence[str] | None = None,
    by: str | Sequence[str] | None = None,
    floor: Any = None,
    title: str | None = None,
    width: float | None = None,
) -> Figure:
    """The per-layer figure of a tidy frame (from `probe`, `measure`, `simulate` or a run).

    One panel per metric (its own y axis: log for quantities that shrink to zero, linear for
    cosines and ranks), one series per value of `by` (default: every identifying column
    that varies, e.g. model and variant); the band runs from the 10th to the 90th percentile
    of the samples on every axis; floor markers as in the module docstring.

    Args:
        frame: tidy rows with columns layer, metric, value (and at_floor).
        metric: one metric name, several, or None for every metric in the frame.
        by: the column(s) that name a series; None = those of ID_COLUMNS that vary.
        floor: dtype (or value) of the floor the at_floor column flags, e.g. torch.float32.
        title: the figure's title.
        width: in inches; None = a column for one panel, the text width for more.

    Example:
        >>> df = pd.DataFrame({"layer": [0, 1, 0, 1], "metric": ["mu_rel"] * 4,
        ...     "value": [1.0, 0.1, 1.0, 0.5], "variant": ["san", "san", "skip", "skip"]})
        >>> [ax.get_yscale() for ax in layers(df).axes]
        ['log']
    """
    names = _layer_metrics(frame, metric)
    data, hue = _series_column(frame[frame["metric"].isin(names)], by)
    hues = ordered_values(data[hue]) if hue else [None]
    # more than MAX_SERIES series: small multiples, a panel per (metric, series), each metric
    # starting a row of its own and sharing one y axis (labelled once per row)
    multiples = len(hues) > MAX_SERIES
    panels = _panels(names, hues if multiples else [None])
    mark = floor_of(floor)
    with context():
        fig, slots = new_figure(len(panels), sharey=False, width=width)
        for ax, panel in zip(slots, panels, strict=True):
            ax.set_visible(panel is not None)
        axes = [ax for ax, panel in zip(slots, panels, strict=True) if panel is not None]
        panels = [panel for panel in panels if panel is not None]
        logs = {}
        for (name, h), ax in zip(panels, axes, strict=True):
            rows = data[data["metric"] == name]
            logs[ax] = (
                name not in BOUNDED
                and _log_scale(rows, "value", True, "at_floor")
                and (name in SHRINKING or spans_decades(rows["value"]))
            )
            series = hue if multiples else None  # small multiples: this panel's series only
            _layer_panel(
                ax,
                rows if h is None else rows[rows[hue] == h],
                logy=logs[ax],
                hue=None if multiples else hue,
                hues=[None] if multiples else hues,
                mark=mark,
                heading=_series_label(h) if series else words(name),  # as the probe's panels
                ylabel=words(name) if multiples else None,
            )
        _floor_points(fig, mark, axes, logs, [name for name, _ in panels])
        if multiples:
            _share_y(axes, [name for name, _ in panels])
        _outer_labels(axes, data["layer"], logx=False)
        several = (data.groupby([c for c in ("layer", "metric", hue) if c]).size() > 1).any()
        legend_title = words(hue) if hue and not multiples else None
        _legend(fig, axes, legend_title, mark, "quantile" if several else None)
        _suptitle(fig, title)
        _fix_places(axes)
        _spread_share_labels(fig)
    return fig


def _fix_places(axes: list) -> None:
    """Fix the places matplotlib would search again at every layout pass and draw where the
    search cannot move them: an empty axis label's (it shows nothing), and a panel title's
    when no y offset text (e.g. "1e-7") can push it up (its place is then the axes' top).
    Each search measures every tick label of the axis: the probe's 12-panel figure is laid
    out and drawn in about half the calls without them. Called once the limits are final."""
    for ax in axes:
        for axis, coords in ((ax.xaxis, (0.5, 0.0)), (ax.yaxis, (0.0, 0.5))):
            if not axis.label.get_text():
                axis.set_label_coords(*coords)  # on the spine: inside the axes' own extent
        formatter = ax.yaxis.get_major_formatter()
        formatter.set_locs(ax.yaxis.get_majorticklocs())  # as a draw sets them
        on_top = ax.xaxis.get_label_position() == "top"
        on_top |= ax.xaxis.get_major_ticks(1)[0].label2.get_visible()  # x tick labels on top
        if ax.get_title() and not formatter.get_offset() and not on_top:
            ax.set_title(ax.get_title(), y=1.0)  # a fixed y: never searched


def prepare_layers(n_metrics: int, n_series: int, *, width: float | None = None) -> None:
    """Build ahead the empty figure of the next `layers` call on `n_metrics` metrics and
    `n_series` series (`style.prepare_figure`); a call of another shape builds its own."""
    multiples = n_series > MAX_SERIES
    panels = _panels(list(range(n_metrics)), list(range(n_series)) if multiples else [None])
    with context():
        prepare_figure(len(panels), sharey=False, width=width)


def _layer_metrics(frame: pd.DataFrame, metric: str | Sequence[str] | None) -> list[str]:
    """The metrics `layers` draws, in the frame's order when None; refuses a frame without
    layer, metric and value columns, and a metric it does not hold."""
    from rankcollapse.errors import InputError

    tidy = "pass the tidy frame of probe, measure, simulate or a run's results.csv"
    check_frame(frame, ("layer", "metric", "value"), ("layer", "value"), tidy)
    names = ordered_values(frame["metric"]) if metric is None else as_names(metric)
    held = set(frame["metric"])
    unknown = [m for m in names if m not in held]
    if unknown:
        raise InputError(
            f"metric(s) {unknown} are not in the frame; it has {ordered_values(frame['metric'])}."
        )
    return names


def _series_column(
    data: pd.DataFrame, by: str | Sequence[str] | None
) -> tuple[pd.DataFrame, str | None]:
    """(data, hue): the column naming a series, None for one series. `by` None = those of
    ID_COLUMNS that vary; several columns are joined into one ("model / variant")."""
    if by is None:
        by = [c for c in ID_COLUMNS if c in data and data[c].nunique(dropna=False) > 1]
    by = as_names(by)
    if not by:
        return data, None
    vary = "pass by= columns it has, or None for the ones that vary of " + ", ".join(ID_COLUMNS)
    check_frame(data, by, (), vary)
    hue = by[0] if len(by) == 1 else " / ".join(by)
    if len(by) > 1:  # a missing value (a folder without that column) reads as "-"
        labels = data[by].astype(object).fillna("-").astype(str)
        data = data.assign(**{hue: labels.agg(" / ".join, axis=1)})
    return data, hue


def _layer_panel(
    ax, rows: pd.DataFrame, *, logy: bool, hue, hues: list, mark: Floor, heading, ylabel
) -> None:
    """One panel of `layers`: its series, its title wrapped to its width, the y label on the
    left column only (wrapped to the panel's height)."""
    _draw_panel(
        ax,
        rows,
        x="layer",
        y="value",
        hue=hue,
        hues=hues,
        logy=logy,
        band="quantile",
        floor_column="at_floor",
        floor=mark,
    )
    fig = ax.get_figure()
    if heading:
        width = ax.get_position().width * fig.get_figwidth() * 72
        ax.set_title(_wrap(heading, width, RC["axes.titlesize"]))
    if ylabel and ax.get_subplotspec().colspan.start == 0:
        ylabel = _wrap(ylabel, 0.9 * PANEL_HEIGHT * 72, RC["axes.labelsize"])
    else:
        ylabel = None
    _finish_axes(
        ax, rows["layer"], x="layer", logx=False, logy=logy, ylabel=ylabel, y_values=rows["value"]
    )


def _panels(names: list, hues: list, n_cols: int = 3) -> list:
    """(metric, series) per panel; with several series, each metric's panels fill whole rows
    of `n_cols` (None: an empty cell), so a metric's panels share rows and a y label."""
    if hues == [None]:
        return [(name, None) for name in names]
    cols = min(len(hues), n_cols)
    pad = [None] * (-len(hues) % cols)
    return [p for name in names for p in [*((name, h) for h in hues), *pad]][: -len(pad) or None]


def _floor_points(fig: Figure, mark: Floor, axes: list, logs: dict, names: list) -> None:
    """Floor markers: at the dtype's floor value on relative metrics' axes (one group per
    scale), at the bottom of each axis of a metric in the states' units (ABSOLUTE)."""
    absolute = [ax for ax, name in zip(axes, names, strict=True) if name in ABSOLUTE]
    for logy in (True, False):
        part = [ax for ax in axes if logs[ax] == logy and ax not in absolute]
        _place_floor_points(fig, _points_in(mark, part, mark.value), part, logy=logy)
    for ax in absolute:
        _place_floor_points(fig, _points_in(mark, [ax], None), [ax], logy=logs[ax])
    if mark.value is not None and any(p[0] in absolute for p in mark.points):
        mark.label += " (on an absolute metric: its axis bottom)"


def _points_in(mark: Floor, axes: list, value: float | None) -> Floor:
    return Floor(value, mark.label, [p for p in mark.points if p[0] in axes])


def _share_y(axes: list, names: list) -> None:
    """One y range per metric over its panels (the widest), tick labels on the left column."""
    for name in dict.fromkeys(names):
        group = [ax for ax, n in zip(axes, names, strict=True) if n == name]
        lows, highs = zip(*(ax.get_ylim() for ax in group), strict=True)
        for ax in group:
            ax.set_ylim(min(lows), max(highs))
            if ax.get_subplotspec().colspan.start:
                ax.tick_params(labelleft=False)


def spans_decades(values: pd.Series) -> bool:
    """True when the positive values span two decades or more: a linear axis would draw the
    smaller ones as 0 (1e-3 next to 1), so they go on a log axis.

    Example:
        >>> spans_decades(pd.Series([1.0, 0.3, 1e-3])), spans_decades(pd.Series([1.0, 0.05]))
        (True, False)
    """
    positive = values[values > 0]
    return bool(not positive.empty and positive.max() / positive.min() >= 100)
