"""Measured per-layer curves: their statistics, the one measured collapse rate (used by every
experiment and bound), and what the Wu experiments read from mu curves of any network
(`curve_slopes`, `early_drop`; the curves themselves are measured by
`rankcollapse.measure.toy_curves` and `rankcollapse.measure.real_curves`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd

from rankcollapse.errors import InputError
from rankcollapse.frames import as_names, check_frame


class CollapseRate(NamedTuple):
    slope: float
    """Natural-log slope per layer (negative: the quantity shrinks); NaN if < 2 layers fit."""
    n_fit: int
    """Layers used: 0 .. n_fit - 1, those before the first layer with a value at the floor."""


def collapse_rate(curve: pd.DataFrame) -> CollapseRate:
    """Fitted exponential rate of one curve, rows (layer, sample, value, at_floor).

    Formula: slope of the least-squares line through (l, mean over samples of log value_l),
    i.e. of the geometric mean over samples, for the layers before the first one where any
    sample sits at the dtype floor (below it a value is rounding, not signal). Compared with
    Wu et al. 2024, Thm 1, whose bound is mu(X^l) <= C (1 - eps^r)^(l / r) (a slope of
    log(1 - eps^r) / r per layer).

    Example:
        >>> curve = pd.DataFrame({"layer": [0, 1, 2, 3], "sample": 0, "at_floor": False,
        ...                       "value": np.exp(-0.5 * np.arange(4.0))})
        >>> rate = collapse_rate(curve)
        >>> round(rate.slope, 6), rate.n_fit
        (-0.5, 4)
    """
    stats = _log_means(curve, [])
    return _fit(stats["log"].to_numpy(), stats["floor"].to_numpy(dtype=bool))


def collapse_rates(curves: pd.DataFrame, by: str | Sequence[str]) -> pd.DataFrame:
    """`collapse_rate` of every curve in `curves`, one row per group of `by` (in the order the
    groups first appear): by..., slope, n_fit. One pass over the rows, for many curves.

    Example:
        >>> curves = pd.DataFrame({"v": ["a", "a", "b", "b"], "layer": [0, 1] * 2,
        ...                        "at_floor": False, "value": [1.0, 0.5, 1.0, 0.25]})
        >>> collapse_rates(curves, ["v"]).round(4).to_dict("records")
        [{'v': 'a', 'slope': -0.6931, 'n_fit': 2}, {'v': 'b', 'slope': -1.3863, 'n_fit': 2}]
    """
    by = as_names(by)
    stats = _log_means(curves, by)
    rows = []
    for key, curve in stats.groupby(by, sort=False):
        rate = _fit(curve["log"].to_numpy(), curve["floor"].to_numpy(dtype=bool))
        rows.append({**dict(zip(by, key, strict=True)), "slope": rate.slope, "n_fit": rate.n_fit})
    return pd.DataFrame(rows, columns=[*by, "slope", "n_fit"])


def sample_rates(curves: pd.DataFrame, by: str | Sequence[str]) -> pd.DataFrame:
    """One collapse slope per sample: `collapse_rates` by (by..., sample), each sample's fit
    running up to *and including* its first layer at the dtype floor (the value there is at
    most the floor, so the slope is at most as steep as the true fall: a curve at the floor
    from layer 1 still has a slope, where the fit before the floor would have one layer).
    The units a finding's interval is taken over (`rankcollapse.experiments.verdicts`).

    Example:
        >>> curves = pd.DataFrame({"sample": [0, 0, 0, 1, 1, 1], "layer": [0, 1, 2] * 2,
        ...                        "at_floor": [False, True, True, False, False, False],
        ...                        "value": [1.0, 1e-16, 1e-16, 1.0, 0.5, 0.25]})
        >>> sample_rates(curves, []).round(3).to_dict("records")
        [{'sample': 0, 'slope': -36.841, 'n_fit': 2}, {'sample': 1, 'slope': -0.693, 'n_fit': 3}]
    """
    keys = [*as_names(by), "sample"]
    _check_curves(curves, keys)
    rows = curves.sort_values("layer", kind="stable")
    floor = rows["at_floor"].astype(bool)
    before = floor.groupby([rows[k] for k in keys], sort=False).cumsum() - floor
    return collapse_rates(rows[before == 0].assign(at_floor=False), keys)


class Persistence(NamedTuple):
    ratio: float
    """Last quarter's fall over the quarter before's (see `rate_persistence`)."""
    floor_layer: int | None
    """The first layer with a value at the dtype floor; None when none is."""
    decades: float
    """Decades lost by the geometric mean from layer 0 to the floor or the last layer."""


def rate_persistence(curve: pd.DataFrame) -> Persistence:
    """Whether one curve's fall keeps its rate: rows (layer, sample, value, at_floor).

    Formula: with g_l the mean over samples of log value_l and E the last layer before any
    sample is at the dtype floor, q = floor(E / 4): ratio = (g_{E-q} - g_E) / (g_{E-2q} -
    g_{E-q}), the last quarter's fall over the quarter before's. An exponential fall at any
    rate gives about 1 (Wu et al. 2024, Thm 2 / Cor 1: mu(X^t) <= C (1 - n eps^{2r})^{t/(2r)});
    a fall levelling off at a plateau p + c f^l gives about f^q, near 0. 0 when either quarter
    does not fall, inf when the floor is reached (the collapse itself, observed), NaN with
    fewer than 4 layers.

    Example:
        >>> curve = pd.DataFrame({"layer": range(9), "sample": 0, "at_floor": False,
        ...                       "value": 0.5 ** np.arange(9.0)})
        >>> rate = rate_persistence(curve)
        >>> round(rate.ratio, 6), rate.floor_layer, round(rate.decades, 3)
        (1.0, None, 2.408)
    """
    stats = _log_means(curve, []).set_index("layer")
    g, floored = stats["log"] / math.log(10), stats.index[stats["floor"]]
    if len(floored):
        first = int(floored[0])
        return Persistence(math.inf, first, float(g.iloc[0] - g.loc[first]))
    end = int(g.index[-1])
    decades, q = float(g.iloc[0] - g.loc[end]), end // 4
    if q == 0:
        return Persistence(math.nan, None, decades)
    last, before = g.loc[end - q] - g.loc[end], g.loc[end - 2 * q] - g.loc[end - q]
    if last <= 0 or before <= 0:
        return Persistence(0.0, None, decades)
    return Persistence(float(last / before), None, decades)


CURVE = (
    "pass rows (layer, sample, value, at_floor) of one metric, as probe, measure or simulate "
    "write them"
)


STATS = "pass the table layer_stats gives"
TIDY = (
    "pass the tidy rows (layer, sample, metric, value, at_floor) probe, measure or simulate write"
)


def _check_curves(curves: pd.DataFrame, by: Sequence[str]) -> None:
    columns = ["layer", "value", "at_floor", *by]
    check_frame(curves, columns, ["layer", "value"], CURVE, empty=True)  # no curve: no rate


def _log_means(curves: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Per (by..., layer): the mean over samples of log value and whether any value sits at the
    dtype floor; groups in the order they first appear, layers ascending within each."""
    _check_curves(curves, by)
    logs = np.log(curves["value"].astype(float).clip(lower=1e-300))
    frame = curves.assign(log=logs, floor=curves["at_floor"].astype(bool))
    stats = (
        frame.groupby([*by, "layer"], sort=False)
        .agg(log=("log", "mean"), floor=("floor", "any"))
        .reset_index()
    )
    group = stats.groupby(by, sort=False).ngroup() if by else 0
    return stats.assign(group=group).sort_values(["group", "layer"], kind="stable")


def _fit(log_means: np.ndarray, floor: np.ndarray) -> CollapseRate:
    from rankcollapse.theory.wu import fitted_rate  # wu loads torch; rates needs numpy only

    n_fit = int(floor.argmax()) if floor.any() else len(floor)
    return CollapseRate(fitted_rate(np.exp(log_means[:n_fit])), n_fit)


def layer_stats(frame: pd.DataFrame, by: str | Sequence[str] = ()) -> pd.DataFrame:
    """Per `by` and layer: mean, std, floor flag and geometric mean of `value` over the rest,
    and the same apart from the floor: n_samples, n_at_floor and mean_above_floor,
    std_above_floor, geo_mean_above_floor over the samples not at the floor (NaN if none).

    Rows (by..., layer, value, at_floor), e.g. one metric's tidy rows; groups keep the order in
    which they first appear. `any_at_floor` is True when any value of the group sits at the
    dtype floor; the geometric mean clips values at the smallest positive float. Tables show
    a group through `layer_cells`, never its `mean` when some value is at the floor.

    Example:
        >>> frame = pd.DataFrame({"layer": [0, 0, 1, 1], "value": [1.0, 4.0, 0.5, 1e-9],
        ...                       "at_floor": [False, False, False, True]})
        >>> table = layer_stats(frame)
        >>> table[["layer", "mean", "geo_mean"]].round(6).to_numpy().tolist()
        [[0.0, 2.5, 2.0], [1.0, 0.25, 2.2e-05]]
        >>> table[["n_at_floor", "mean_above_floor", "geo_mean_above_floor"]].to_numpy().tolist()
        [[0.0, 2.5, 2.0], [1.0, 0.5, 0.5]]
    """
    by = as_names(by)
    _check_curves(frame, by)
    tiny = np.finfo(float).tiny
    floored = frame["at_floor"].astype(bool)
    above = frame["value"].where(~floored)
    table = (
        frame.assign(
            log=np.log(frame["value"].clip(lower=tiny)),
            _floored=floored,
            _above=above,
            _log_above=np.log(above.clip(lower=tiny)),
        )
        .groupby([*by, "layer"], sort=False)
        .agg(
            mean=("value", "mean"),
            std=("value", "std"),
            log_mean=("log", "mean"),
            any_at_floor=("at_floor", "any"),
            n_samples=("value", "size"),
            n_at_floor=("_floored", "sum"),
            mean_above_floor=("_above", "mean"),
            std_above_floor=("_above", "std"),
            log_above=("_log_above", "mean"),
        )
        .reset_index()
    )
    table["geo_mean"] = np.exp(table.pop("log_mean"))
    table["geo_mean_above_floor"] = np.exp(table.pop("log_above"))
    table["n_at_floor"] = table["n_at_floor"].astype(int)
    return table


def layer_cells(table: pd.DataFrame, of: str = "mean") -> pd.Series:
    """The cells a report shows for `of` ("mean" or "geo_mean") of a `layer_stats` table:
    `metrics.floor_cell` of each row ('<floor', or the value over the samples above the floor
    and, when some are at it, their share: '3e-06 (28/32 <floor)').

    Example:
        >>> table = pd.DataFrame({"mean_above_floor": [0.5, np.nan, 3e-6],
        ...                       "n_at_floor": [0, 4, 28], "n_samples": [4, 4, 32]})
        >>> layer_cells(table).tolist()
        ['0.5', '<floor', '3e-06 (28/32 <floor)']
    """
    from rankcollapse.metrics import floor_cell

    check_frame(table, [f"{of}_above_floor", "n_at_floor", "n_samples"], [], STATS, empty=True)
    values = table[f"{of}_above_floor"]
    cells = map(floor_cell, values, table["n_at_floor"], table["n_samples"])
    return pd.Series(list(cells), index=table.index, dtype=object)


def shown_layer_stats(table: pd.DataFrame) -> pd.DataFrame:
    """A `layer_stats` table as a report shows it: by..., layer, then mean and geo_mean as
    `layer_cells` and std over the samples above the floor; no statistic mixes floor values.

    Example:
        >>> table = layer_stats(pd.DataFrame({"layer": 0, "value": [1.0, 1e-9],
        ...                                   "at_floor": [False, True]}))
        >>> shown_layer_stats(table).to_dict("records")
        [{'layer': 0, 'mean': '1 (1/2 <floor)', 'std': nan, 'geo_mean': '1 (1/2 <floor)'}]
    """
    columns = ["layer", "std_above_floor", "mean_above_floor", "geo_mean_above_floor"]
    check_frame(table, columns, [], STATS, empty=True)
    keys = list(table.columns[: table.columns.get_loc("layer") + 1])
    return table[keys].assign(
        mean=layer_cells(table),
        std=table["std_above_floor"],
        geo_mean=layer_cells(table, "geo_mean"),
    )


def first_layer_below(
    table: pd.DataFrame, level: float, *, by: str = "model"
) -> dict[str, tuple[float, int]]:
    """Per `by` of a `layer_stats` table: (first layer whose mean is below `level`, or inf;
    the deepest layer).

    Example:
        >>> table = pd.DataFrame({"model": "m", "layer": [0, 1, 2], "mean": [1.0, 0.1, 1e-3]})
        >>> first_layer_below(table, 0.01)
        {'m': (2.0, 2)}
    """
    check_frame(table, [by, "layer", "mean"], ["layer", "mean"], STATS, empty=True)
    found = {}
    for key, part in table.groupby(by, sort=False):
        below = part.loc[part["mean"] < level, "layer"]
        found[key] = (float(below.min()) if len(below) else math.inf, int(part["layer"].max()))
    return found


def at_layer(table: pd.DataFrame, layer: int | str, *, by: str = "model") -> pd.DataFrame:
    """The rows of a per-layer table at `layer`; "last": at each `by`'s own last layer.

    Example:
        >>> table = pd.DataFrame({"model": ["a", "a", "b"], "layer": [1, 2, 1], "mean": [3, 4, 5]})
        >>> at_layer(table, "last")["mean"].tolist(), at_layer(table, 1)["mean"].tolist()
        ([4, 5], [3, 5])
    """
    columns = ["layer", by] if layer == "last" else ["layer"]
    check_frame(table, columns, ["layer"], "pass a table with a row per layer", empty=True)
    if layer == "last":
        return table[table["layer"] == table.groupby(by)["layer"].transform("max")]
    return table[table["layer"] == layer]


def layers_above(
    frame: pd.DataFrame, metric: str, level: float, *, by: str | Sequence[str]
) -> pd.DataFrame:
    """Mean of every metric per (by..., layer) where the mean of `metric` exceeds `level`.

    Rows (by..., layer, metric, value, at_floor); one column per metric in the result, e.g.
    where res_comp_rel exceeds 1, with mu_rel and the stable rank that explain it.

    Example:
        >>> frame = pd.DataFrame({"model": "m", "layer": [0, 0, 1, 1], "at_floor": False,
        ...                       "metric": ["a", "b"] * 2, "value": [2.0, 0.5, 0.1, 0.2]})
        >>> layers_above(frame, "a", 1.0, by=["model"]).to_dict("records")
        [{'model': 'm', 'layer': 0, 'a': 2.0, 'b': 0.5}]
    """
    by = as_names(by)
    check_frame(frame, [*by, "layer", "metric", "value", "at_floor"], ["layer", "value"], TIDY)
    if metric not in set(frame["metric"]):
        raise InputError(
            f"metric {metric!r} is not in the frame; it has {list(dict.fromkeys(frame['metric']))}."
        )
    keys = [*by, "layer"]
    means = layer_stats(frame, (*by, "metric")).pivot_table(
        index=keys, columns="metric", values="mean"
    )
    return means[means[metric] > level].rename_axis(columns=None).reset_index()


def contraction_factors(curve: pd.DataFrame) -> tuple[float, np.ndarray, pd.DataFrame]:
    """(max q_{l+1} / q_l, the factors q_l, the layers used) of one `layer_stats` curve.

    Formula: q_l = R_{l+1} / R_l of the geometric mean R over the unbroken run of layers from
    the input up to the first layer at the floor; a doubly exponential collapse (Dong et al.
    2021, Thm 2.2: r_l <= c r_{l-1}^3) has shrinking q_l, so max q_{l+1} / q_l < 1. NaN when
    fewer than three layers are above the floor.

    Example:
        >>> curve = pd.DataFrame({"layer": [0, 1, 2, 3], "any_at_floor": False,
        ...                       "geo_mean": [0.5, 0.5**3, 0.5**9, 0.5**27]})
        >>> round(contraction_factors(curve)[0], 6)
        0.0625
    """
    columns = ["layer", "any_at_floor", "geo_mean"]
    check_frame(curve, columns, ["layer", "geo_mean"], STATS, empty=True)  # no layer: NaN
    above = curve[~curve["any_at_floor"].astype(bool)].sort_values("layer")
    layers = above["layer"].to_numpy()
    run = above[layers == np.arange(len(layers)) + layers[0]] if len(layers) else above
    q = run["geo_mean"].to_numpy()[1:] / run["geo_mean"].to_numpy()[:-1]
    ratios = q[1:] / q[:-1]
    return (float(ratios.max()) if len(ratios) else float("nan")), q, run


def curve_slopes(results: pd.DataFrame, by: str | Sequence[str]) -> pd.DataFrame:
    """The collapse slope (`collapse_rate`) of every curve of mu and mu_rel, one row per group
    of `by`: slope_mu, slope_mu_rel, fit_layers_mu, fit_layers_mu_rel and `diverged` (a
    `diverged` row in the group: its slopes are NaN).

    Example:
        >>> rows = pd.DataFrame({"v": "a", "layer": [0, 1], "sample": 0, "at_floor": False,
        ...                      "metric": "mu", "value": [1.0, 0.25]})
        >>> curve_slopes(rows, ["v"])[["v", "slope_mu", "diverged"]].round(4).values.tolist()
        [['a', -1.3863, False]]
    """
    by = as_names(by)
    columns = [*by, "layer", "metric", "value", "at_floor"]
    check_frame(results, columns, ["layer", "value"], TIDY, empty=True)
    table = results[by].drop_duplicates().reset_index(drop=True)
    for metric in ("mu", "mu_rel"):
        rates = collapse_rates(results[results["metric"] == metric], by)
        rates = rates.rename(columns={"slope": f"slope_{metric}", "n_fit": f"fit_layers_{metric}"})
        table = table.merge(rates, on=by, how="left")
    diverged = results.loc[results["metric"] == "diverged", by].drop_duplicates()
    table = table.merge(diverged.assign(diverged=True), on=by, how="left")
    table["diverged"] = table["diverged"].eq(True)
    return table


def early_drop(curve: pd.DataFrame, early_layers: int, floor: float) -> float:
    """log mu_rel(0) - log mu_rel(early_layers) of the mean log over samples, floor-clipped:
    the early collapse of a curve (Wu et al. 2024, temperature experiment). A curve that
    reaches the dtype floor early has a finite drop.

    Example:
        >>> curve = pd.DataFrame({"layer": [0, 1, 2], "value": [1.0, 0.1, 1e-30]})
        >>> round(early_drop(curve, 2, 1e-15), 4)  # 15 ln 10: the floor caps the drop
        34.5388
    """
    check_frame(curve, ["layer", "value"], ["layer", "value"], CURVE)
    logs = np.log(curve["value"].clip(lower=floor)).groupby(curve["layer"]).mean()
    last = min(early_layers, int(logs.index.max()))
    return float(logs.loc[0] - logs.loc[last])
