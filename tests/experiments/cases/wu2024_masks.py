"""wu2024-masks findings on hand-made curves: pure SAN of the toy under two masks."""

from __future__ import annotations

import numpy as np
import pandas as pd
from _case import Case

OVERRIDES = {"models": ["toy"], "masks": ["complete", "window:1"], "toy": {"n_tokens": 8}}


def curve(mask: str, slope: float, *, n_layers: int = 4) -> pd.DataFrame:
    """mu = mu_rel = exp(slope * layer) of pure SAN on the toy, two samples."""
    layer = np.repeat(np.arange(n_layers + 1), 2)
    rows = pd.DataFrame({"layer": layer, "sample": np.tile([0, 1], n_layers + 1),
                         "value": np.exp(slope * layer), "at_floor": False})  # fmt: skip
    both = pd.concat([rows.assign(metric="mu"), rows.assign(metric="mu_rel")])
    return both.assign(model="toy", init="random", variant="san", mask=mask, mode="eval")


def diverged(mask: str) -> pd.DataFrame:
    return pd.DataFrame([{"model": "toy", "init": "random", "variant": "san", "mask": mask,
                          "mode": "eval", "layer": np.nan, "sample": np.nan,
                          "metric": "diverged", "value": 1.0, "at_floor": False}])  # fmt: skip


def table(*curves: pd.DataFrame) -> pd.DataFrame:
    return pd.concat(curves, ignore_index=True)


CASES = {
    # complete (radius 1) collapses 4x faster than the window (radius 4 at 8 tokens)
    "san-collapses-every-mask": Case(
        passing=table(curve("complete", -2.0), curve("window:1", -0.5)),
        failing=table(curve("complete", -2.0), diverged("window:1")),
        overrides=OVERRIDES,
    ),
    "local-masks-slower@toy/eval": Case(
        passing=table(curve("complete", -2.0), curve("window:1", -0.5)),
        failing=table(curve("complete", -2.0), curve("window:1", 0.1)),  # no speed to compare
        overrides=OVERRIDES,
    ),
    "rate-follows-radius@toy/eval": Case(
        passing=table(curve("complete", -2.0), curve("window:1", -0.5)),
        failing=table(curve("complete", -0.5), curve("window:1", -2.0)),
        overrides=OVERRIDES,
    ),
}
