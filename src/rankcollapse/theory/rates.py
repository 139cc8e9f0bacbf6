"""The measured collapse rate of a curve: one definition for every experiment and bound."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from rankcollapse.theory.wu import fitted_rate


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
    logs = np.log(curve["value"].astype(float).clip(lower=1e-300))
    by_layer = curve.assign(log=logs, at_floor=curve["at_floor"].astype(bool)).groupby("layer")
    stats = by_layer.agg(log=("log", "mean"), floor=("at_floor", "any")).sort_index()
    floor = stats["floor"].to_numpy(dtype=bool)
    n_fit = int(floor.argmax()) if floor.any() else len(stats)
    geometric_mean = np.exp(stats["log"].to_numpy()[:n_fit])
    return CollapseRate(fitted_rate(geometric_mean), n_fit)
