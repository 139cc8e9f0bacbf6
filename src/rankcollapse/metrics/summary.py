"""Per-layer summaries of a tidy metrics frame that keep values at a dtype floor apart.

A mean over sequences mixes signal with rounding noise as soon as one sequence sits at the
floor of its dtype (say 7 of 16 sequences at 1e-7 and 9 near 0.9 average to 0.4, a value
no sequence has). `summarize_samples` reports, per (ids..., layer, metric), the mean and
quantiles over sequences together with the share of sequences at the floor, the mean of the
sequences above it, and says whether the mean is signal (no sequence at the floor). Figures draw a mean only where it is signal and
the share at the floor (or the sequences one by one) elsewhere.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from rankcollapse.errors import InputError

PER_SAMPLE = ("sample", "value", "at_floor")


def summarize_samples(
    frame: pd.DataFrame, *, quantiles: Sequence[float] = (0.1, 0.5, 0.9)
) -> pd.DataFrame:
    """Summary over sequences of a tidy frame (as `metrics_frame` makes), one row per group.

    Groups are every column but `sample`, `value` and `at_floor` (the ids, `layer`,
    `metric`), in the frame's column order and in first-seen row order.

    Args:
        frame: long table with columns ids..., metric, value, at_floor (and usually sample).
        quantiles: levels in [0, 1]; each gives a column `q{100 * level}` (0.1 -> q10).

    Returns:
        DataFrame: group columns, then n_samples, mean, the quantile columns, share_at_floor
        (fraction of sequences flagged at the floor), n_at_floor (their count),
        mean_above_floor (mean over the others; NaN when every one is at the floor) and
        mean_is_signal (True iff none is).

    Example:
        >>> frame = pd.DataFrame({"layer": [3, 3], "sample": [0, 1], "metric": ["mu_rel"] * 2,
        ...                       "value": [0.9, 1e-9], "at_floor": [False, True]})
        >>> row = summarize_samples(frame, quantiles=(0.5,)).iloc[0]
        >>> int(row["n_samples"]), float(row["share_at_floor"]), bool(row["mean_is_signal"])
        (2, 0.5, False)
        >>> int(row["n_at_floor"]), float(row["mean_above_floor"])
        (1, 0.9)
    """
    missing = [column for column in ("metric", "value", "at_floor") if column not in frame]
    if missing:
        raise InputError(
            f"the frame lacks column(s) {missing} (it has {list(frame.columns)}); pass the "
            "long table that metrics_frame, probe, measure or a run's results.csv give."
        )
    levels = tuple(float(level) for level in quantiles)
    if not all(0.0 <= level <= 1.0 for level in levels):
        raise InputError(f"quantiles must lie in [0, 1], got {tuple(quantiles)}.")
    keys = [column for column in frame.columns if column not in PER_SAMPLE]
    floored = frame["at_floor"].eq(True)  # a missing flag is no floor
    grouped = frame.assign(_floored=floored, _above=frame["value"].where(~floored)).groupby(
        keys, sort=False, dropna=False
    )
    summary = grouped.agg(
        n_samples=("value", "size"),
        mean=("value", "mean"),
        share_at_floor=("_floored", "mean"),
        n_at_floor=("_floored", "sum"),
        mean_above_floor=("_above", "mean"),
    )
    for level in levels:
        summary.insert(
            summary.columns.get_loc("share_at_floor"),
            f"q{100 * level:g}",
            grouped["value"].quantile(level),
        )
    summary["share_at_floor"] = summary["share_at_floor"].astype(float)
    summary["n_at_floor"] = summary["n_at_floor"].astype(int)
    summary["mean_is_signal"] = summary["share_at_floor"] == 0.0
    return summary.reset_index()


def floor_cell(mean_above_floor: float, n_at_floor: int, n_samples: int) -> str:
    """A table cell as every table shows it (printed, report.html, tables/*.csv): '-' where
    there is no value, '<floor' where every sample sits at the dtype floor, else the mean of
    the samples above the floor to 3 significant digits, followed by the share at the floor
    when some are: a floor value is rounding noise, never averaged into a mean.

    Example:
        >>> floor_cell(3e-6, 28, 32), floor_cell(float("nan"), 32, 32), floor_cell(0.5, 0, 4)
        ('3e-06 (28/32 <floor)', '<floor', '0.5')
    """
    if n_samples and n_at_floor == n_samples:
        return "<floor"
    if not n_samples or math.isnan(mean_above_floor):
        return "-"
    share = f" ({n_at_floor}/{n_samples} <floor)" if n_at_floor else ""
    return f"{mean_above_floor:.3g}{share}"


__all__ = ["floor_cell", "summarize_samples"]
