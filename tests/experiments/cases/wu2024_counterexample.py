"""wu2024-counterexample checks on hand-made ends of a ring of 8 starts (45-degree steps).

At w = 2 the arc runs from arccos(-1/2) = 120 to 270 degrees: the starts 135, 180 and 225
(and 270, its closed end, at this resolution) reach B."""

from __future__ import annotations

import pandas as pd

OVERRIDES = {"w": [2.0], "token1_angles": [90.0], "n_angles": 8}
STARTS = [0.0, 45.0, 90.0, 135.0, 180.0, 225.0, 270.0, 315.0]


def ends(reaching: list[float], *, no_ln_mu_rel: float = 1e-20) -> pd.DataFrame:
    rows = [
        {
            "part": "end",
            "token1_angle": 90.0,
            "norm": "LN",
            "start_angle": a,
            "sample": i,
            "metric": "reaches_b",
            "value": float(a in reaching),
            "w": 2.0,
        }
        for i, a in enumerate(STARTS)
    ]
    rows += [
        {
            "part": "curve",
            "token1_angle": 90.0,
            "norm": "no LN",
            "start_angle": a,
            "layer": layer,
            "metric": "mu_rel",
            "value": 1.0 if layer == 0 else no_ln_mu_rel,
            "at_floor": False,
            "w": 2.0,
        }
        for a in STARTS
        for layer in (0, 100)
    ]
    return pd.DataFrame(rows)  # fmt: skip


CASES: dict = {}
CHECKS_ONLY = (
    "the rows evaluate the paper's analytic 2-D construction (fixed weights, a fixed ring of "
    "starts): they hold by design, so they are checks (Wu et al. 2024, the 2-D example)"
)
TABLE = ends([135.0, 180.0, 225.0])
