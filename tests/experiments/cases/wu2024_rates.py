"""wu2024-rates on hand-made curves: mu = factor^t, every allowed weight eps = 0.5.

At 4 tokens the complete mask has radius 1 and the causal window of width 1 radius 3. Thm 1's
bound with its computed constant is sqrt(3) 0.5^t mu(X^0) for the complete mask (1.6 decades
below mu(X^0) after 6 layers: it can fail) and sqrt(3) (1 - 0.5^3)^floor(t/3) mu(X^0) for the
causal window (above mu(X^0) for 6 layers: excluded as uninformative)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from _case import Case

OVERRIDES = {"masks": ["complete", "causal_window:1"], "norms": ["none"], "seeds": [0],
             "n_layers": 6, "n_tokens": 4}  # fmt: skip


def unit(
    mask: str,
    factor: float,
    *,
    eps: float = 0.5,
    n_layers: int = 6,
    norm: str = "none",
    value_gain: float = 1.0,
    spread: float = 0.0,
) -> pd.DataFrame:
    """One curve of two samples: mu = (factor -+ spread)^t, eps per layer, and value-map
    products of norm value_gain^t (1: orthogonal value maps, as the experiment builds them)."""
    layer = np.arange(n_layers + 1)
    mu = pd.concat(
        pd.DataFrame({"layer": layer, "sample": s, "metric": "mu",
                      "value": (factor + spread * (2 * s - 1)) ** layer, "at_floor": False})
        for s in (0, 1)
    )  # fmt: skip
    weights = pd.DataFrame({"layer": layer[1:], "sample": -1, "metric": "eps", "value": eps,
                            "at_floor": False})  # fmt: skip
    norms = pd.DataFrame({"layer": layer, "sample": -1, "metric": "value_norm",
                          "value": value_gain**layer, "at_floor": False})  # fmt: skip
    return pd.concat([mu, weights, norms]).assign(mask=mask, norm=norm, seed=0)


def table(
    complete: float, local: float, value_gain: float = 1.0, spread: float = 0.0
) -> pd.DataFrame:
    return pd.concat(
        [
            unit("complete", complete, value_gain=value_gain),
            unit("causal_window:1", local, value_gain=value_gain, spread=spread),
        ]
    )


LN = {**OVERRIDES, "norms": ["unit"], "n_layers": 12}


def with_ln(
    complete: float,
    local: float,
    plateau: float | tuple[float, float] = 0.0,
    *,
    causal: float | None = None,
    causal_spread: float = 0.0,
) -> pd.DataFrame:
    """Unit-norm curves whose mu_rel is factor^t (mu_rel is what the findings read); with a
    plateau p the local mask's is p + (1 - p) factor^t instead: it levels off at p (a pair:
    one plateau per sample); `causal`: a causal-mask curve too (its samples -+ causal_spread)."""
    local_curve = unit("causal_window:1", local, norm="unit", n_layers=12)
    is_mu = local_curve["metric"] == "mu"
    p = np.where(local_curve["sample"] == 0, *(plateau if isinstance(plateau, tuple)
                                                else (plateau, plateau)))  # fmt: skip
    local_curve.loc[is_mu, "value"] = (p + (1 - p) * local_curve["value"])[is_mu]
    curves = [unit("complete", complete, norm="unit", n_layers=12), local_curve]
    if causal is not None:
        curves.append(unit("causal", causal, norm="unit", n_layers=12, spread=causal_spread))
    curves = pd.concat(curves)
    return curves.assign(metric=curves["metric"].replace({"mu": "mu_rel"}))


CENTRES = {**LN, "masks": ["complete", "causal", "causal_window:1"]}
CASES = {
    # failing: the causal window's mu_rel levels off at 0.5 (0.5 + 0.5 x 0.5^t: its last
    # quarter falls 0.13 x as fast as the one before), the plateau of Wu's 2-D counterexample
    # (W_V not orthogonal) or of a norm put where it adds a skip; untested: one sample levels
    # off, the other keeps falling
    "ln-collapses-every-mask": Case(
        passing=with_ln(complete=0.25, local=0.8),  # 7.2 and 1.2 decades over 12 layers
        failing=with_ln(complete=0.25, local=0.5, plateau=0.5),
        overrides=LN,
        untested=with_ln(complete=0.25, local=0.5, plateau=(0.0, 0.5)),
    ),
    # failing: the local mask collapses faster; untested: its two samples straddle the complete
    # mask's rate (0.2^t and 0.3^t against 0.25^t)
    "local-masks-slower": Case(
        passing=table(complete=0.25, local=0.5),
        failing=table(complete=0.5, local=0.25),
        overrides=OVERRIDES,
        untested=table(complete=0.25, local=0.25, spread=0.05),
    ),
    # failing: the one-centre causal mask collapses faster than the complete mask
    "centre-nodes-speed": Case(
        passing=with_ln(complete=0.25, local=0.8, causal=0.6),
        failing=with_ln(complete=0.6, local=0.8, causal=0.25),
        overrides=CENTRES,
        untested=with_ln(complete=0.25, local=0.8, causal=0.25, causal_spread=0.05),
    ),
}
