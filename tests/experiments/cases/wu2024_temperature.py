"""wu2024-temperature findings on hand-made mu_rel curves of the toy: drop = -slope x 4 layers."""

from __future__ import annotations

import numpy as np
import pandas as pd
from _case import Case

OVERRIDES = {"models": ["toy"], "masks": ["complete", "causal"], "d_qk": [1 / 64, 64.0]}


def curve(mask: str, d_qk: float, slope: float) -> pd.DataFrame:
    """mu_rel = exp(slope * layer) over 5 layers, one sample: early drop = -4 slope."""
    layer = np.arange(5)
    return pd.DataFrame({"model": "toy", "init": "random", "variant": "san", "mask": mask,
                         "d_qk": d_qk, "mode": "eval", "layer": layer, "sample": 0,
                         "metric": "mu_rel", "value": np.exp(slope * layer),
                         "at_floor": False})  # fmt: skip


def table(complete: tuple[float, float], causal: tuple[float, float]) -> pd.DataFrame:
    """Slopes (at d_QK 1/64, at d_QK 64) under each mask."""
    return pd.concat(
        [curve(mask, d_qk, slope)
         for mask, slopes in (("complete", complete), ("causal", causal))
         for d_qk, slope in zip((1 / 64, 64.0), slopes, strict=True)],
        ignore_index=True,
    )  # fmt: skip


CASES = {
    "smaller-dqk-slows@toy/eval": Case(
        passing=table(complete=(-0.1, -3.0), causal=(-0.1, -0.5)),
        # the audit's toy: under causal the sharper attention drops 0.0035 less of ~0.5: noise
        failing=table(complete=(-0.1, -3.0), causal=(-0.12413, -0.125)),
        overrides=OVERRIDES,
    ),
    "complete-most@toy/eval": Case(
        passing=table(complete=(-0.1, -3.0), causal=(-0.1, -0.5)),
        failing=table(complete=(-0.1, -0.5), causal=(-0.1, -3.0)),
        overrides=OVERRIDES,
    ),
}
