"""wu2024-temperature findings on hand-made mu_rel curves of the toy, two samples (the units):
log mu_rel falls by `slope` per layer over layers 1-3 and by `late` after (6 layers)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from _case import Case

OVERRIDES = {"models": ["toy"], "masks": ["complete", "causal"], "d_qk": [1 / 64, 64.0]}
Slopes = tuple[float, float]


def curve(
    mask: str, d_qk: float, slope: float, late: float | None = None, spread: float = 0.0
) -> pd.DataFrame:
    """log mu_rel = s min(l, 3) + late max(l - 3, 0), s = slope -+ spread for samples 0 and 1,
    over 6 layers: early drop (4 layers) = -3 s - late, first-third drop (2 layers) = -2 s,
    last-third drop (layers 4-6) = -2 late."""
    layer = np.tile(np.arange(7), 2)
    sample = np.repeat([0, 1], 7)
    s = slope + spread * (2 * sample - 1)
    late = slope if late is None else late
    log = s * np.minimum(layer, 3) + late * np.maximum(layer - 3, 0)
    return pd.DataFrame({"model": "toy", "init": "random", "variant": "san", "mask": mask,
                         "d_qk": d_qk, "mode": "eval", "layer": layer, "sample": sample,
                         "metric": "mu_rel", "value": np.exp(log), "at_floor": False})  # fmt: skip


def table(
    complete: Slopes, causal: Slopes, *, late: float = -0.1, spread: Slopes = (0.0, 0.0)
) -> pd.DataFrame:
    """Slopes (at d_QK 1/64, at d_QK 64) over layers 1-3 under each mask; at d_QK 64 both masks
    fall by `late` per layer after (the complete mask near its floor); `spread`: the causal
    mask's samples -+ spread at (1/64, 64)."""
    parts = []
    for mask, slopes in (("complete", complete), ("causal", causal)):
        for d_qk, slope, jitter in zip((1 / 64, 64.0), slopes, spread, strict=True):
            tail = late if d_qk == 64.0 else slope
            parts.append(curve(mask, d_qk, slope, tail, jitter if mask == "causal" else 0.0))
    return pd.concat(parts, ignore_index=True)


GOOD = table(complete=(-0.1, -3.0), causal=(-0.1, -0.5))
CASES = {
    # failing: the audit's toy: under causal the sharper attention drops 0.0035 less of ~0.5:
    # noise; untested: the causal samples' relative gaps are -0.1 and 0.34
    "smaller-dqk-slows@toy/eval": Case(
        passing=GOOD,
        failing=table(complete=(-0.1, -3.0), causal=(-0.12413, -0.125), late=-0.125),
        overrides=OVERRIDES,
        untested=table(complete=(-0.1, -3.0), causal=(-0.44, -0.5), late=-0.5, spread=(0.1, 0.0)),
    ),
    # failing: the causal mask slows more; untested: its samples straddle the complete mask's
    "complete-most@toy/eval": Case(
        passing=GOOD,
        failing=table(complete=(-0.1, -0.5), causal=(-0.1, -3.0)),
        overrides=OVERRIDES,
        untested=table(complete=(-0.1, -1.0), causal=(-0.1, -1.0), spread=(0.2, 0.0)),
    ),
    # failing: at d_QK 64 the fall starts slowly and speeds up deeper (late -3 per layer), so
    # the d_QK gap is larger in the last third; untested: the causal gaps straddle
    "shallow-layers-more@toy/eval": Case(
        passing=GOOD,
        failing=table(complete=(-0.1, -0.2), causal=(-0.1, -0.2), late=-3.0),
        overrides=OVERRIDES,
        untested=table(complete=(-0.1, -3.0), causal=(-0.1, -0.2), late=-0.2, spread=(0.0, 0.3)),
    ),
}
