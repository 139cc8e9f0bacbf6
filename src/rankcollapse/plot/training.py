"""Collapse over training: a layer x step heat map and per-layer curves over steps, from the
tidy rows of `rankcollapse.measure.monitor` (step, layer, variant, sample, metric, value, at_floor),
one panel per value of `panel` (an arm, a variant, a run). No I/O."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.colors import LogNorm, Normalize
from matplotlib.figure import Figure

from rankcollapse.errors import InputError
from rankcollapse.frames import check_frame
from rankcollapse.plot.curves import SHRINKING, band_plot, ordered_values
from rankcollapse.plot.style import FLOOR_COLOR, MAX_SERIES, context, new_figure, words

NEEDED = ("step", "layer", "metric", "value")


def _rows(frame: pd.DataFrame, metric: str, panel: str | None) -> pd.DataFrame:
    """The rows of one metric, checked: a clear error names what is missing."""
    columns = (*NEEDED, *([panel] if panel else []))
    check_frame(frame, columns, (), "pass the rows a monitor wrote (measure.monitor.read_log)")
    rows = frame[frame["metric"] == metric]
    if rows.empty:
        raise InputError(
            f"metric '{metric}' is not in the frame; it has {ordered_values(frame['metric'])}."
        )
    values = pd.to_numeric(rows["value"], errors="coerce").to_numpy(float)
    if not np.isfinite(values).any():
        raise InputError(
            f"metric '{metric}' has no finite value ({len(rows)} rows, each NaN or Inf); "
            "nothing to draw. Pick another metric, or check the run that wrote them."
        )
    return rows.assign(value=values)


def not_finite(frame: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The rows of `metric` whose value is NaN or Inf (the figures leave them out)."""
    rows = frame[frame["metric"] == metric]
    values = pd.to_numeric(rows["value"], errors="coerce").to_numpy(float)
    return rows[~np.isfinite(values)]


def training_heatmap(
    frame: pd.DataFrame,
    *,
    metric: str = "res_comp_rel",
    panel: str | None = None,
    title: str | None = None,
) -> Figure:
    """Layer (rows, input at the top) x step (columns) image of the mean of `metric` over the
    held-out samples; one colour scale for every panel (log for quantities that shrink to 0);
    cells where every sample is at the dtype floor are grey; NaN and Inf values are left out
    of the means, and a cell with no finite value left is white (`not_finite` lists them).

    Example:
        >>> df = pd.DataFrame({"step": [0, 0, 10, 10], "layer": [0, 1, 0, 1], "metric": "mu_rel",
        ...                    "value": [1.0, 0.1, 1.0, 0.5], "at_floor": False})
        >>> len(training_heatmap(df, metric="mu_rel").axes)  # the image and its colour bar
        2
    """
    rows = _rows(frame, metric, panel)
    keys = ordered_values(rows[panel]) if panel else [None]
    floor = rows["at_floor"].astype(bool) if "at_floor" in rows else pd.Series(False, rows.index)
    finite = np.isfinite(rows["value"])
    grid = rows.assign(floor=floor, value=rows["value"].where(finite)).groupby(
        ([panel] if panel else []) + ["layer", "step"]
    )
    means, all_floor = grid["value"].mean(), grid["floor"].all()
    missing = means.isna() & ~all_floor
    signal = means[~all_floor & ~missing]
    log = metric in SHRINKING and bool((signal > 0).all()) and not signal.empty
    low, high = (signal.min(), signal.max()) if not signal.empty else (0.0, 1.0)
    means = means.fillna(high + abs(high) + 1.0)  # above the scale: the "over" colour, white
    norm = LogNorm(low, high) if log else Normalize(low, high)
    cmap = colormaps["viridis"].with_extremes(bad=FLOOR_COLOR, over="white")
    with context():
        fig, axes = new_figure(len(keys), sharex=False, sharey=True)
        for key, ax in zip(keys, axes, strict=True):
            part = means if key is None else means.xs(key, level=panel)
            floors = all_floor if key is None else all_floor.xs(key, level=panel)
            image = part.unstack("step")
            shown = np.ma.masked_array(image.to_numpy(float), floors.unstack("step").to_numpy())
            drawn = ax.imshow(
                shown, aspect="auto", origin="upper", norm=norm, cmap=cmap, interpolation="nearest"
            )
            ax.grid(False)
            steps, layers = image.columns.tolist(), image.index.tolist()
            ticks = range(0, len(steps), max(1, -(-len(steps) // 6)))
            ax.set_xticks(list(ticks), [f"{steps[i]:g}" for i in ticks])
            every = max(1, -(-len(layers) // 12))
            ax.set_yticks(list(range(0, len(layers), every)), [f"{l:g}" for l in layers[::every]])
            ax.set_xlabel("step")
            ax.set_ylabel("layer")
            if key is not None:
                ax.set_title(f"{words(panel)} = {key}")
        label = words(metric) + (" (grey: at the dtype floor)" if bool(all_floor.any()) else "")
        fig.colorbar(drawn, ax=axes, label=label)
        note = "white: no finite value (NaN or Inf)" if bool(missing.any()) else None
        if title or note:
            fig.suptitle("\n".join(filter(None, (title, note))))
    return fig


def training_curves(
    frame: pd.DataFrame,
    *,
    metric: str = "res_comp_rel",
    panel: str | None = None,
    title: str | None = None,
) -> Figure:
    """One line per layer through `metric` over steps (mean over the held-out samples, band of
    their 10th-90th percentiles, floor markers; NaN and Inf values left out); at most six
    layers, evenly spread from the input to the last, so the lines stay apart.

    Example:
        >>> df = pd.DataFrame({"step": [0, 0, 10, 10], "layer": [0, 1, 0, 1], "metric": "mu_rel",
        ...                    "value": [1.0, 0.1, 1.0, 0.5], "at_floor": False})
        >>> len(training_curves(df, metric="mu_rel").axes)
        1
    """
    rows = _rows(frame, metric, panel)
    rows = rows[np.isfinite(rows["value"])]
    layers = sorted(rows["layer"].unique())
    if len(layers) > MAX_SERIES:
        picks = np.linspace(0, len(layers) - 1, MAX_SERIES).round().astype(int)
        rows = rows[rows["layer"].isin([layers[i] for i in picks])]
    heading = words(metric) if title is None else f"{title}: {words(metric)}"
    # the formula goes in the title: as the label of every row of panels it would overlap
    return band_plot(
        rows,
        x="step",
        hue="layer",
        panel=panel,
        logy=metric in SHRINKING,
        title=heading,
        ylabel=metric,
        band="quantile",
    )
