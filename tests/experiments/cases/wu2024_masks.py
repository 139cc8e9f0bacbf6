"""wu2024-masks findings on hand-made curves: pure SAN of the toy under two masks."""

from __future__ import annotations

import numpy as np
import pandas as pd
from _case import Case

OVERRIDES = {"models": ["toy"], "masks": ["complete", "window:1"], "toy": {"n_tokens": 8}}


def curve(
    mask: str, slope: float, *, n_layers: int = 4, growth: float = 0.0, mode: str = "eval"
) -> pd.DataFrame:
    """mu_rel = exp(slope * layer) of pure SAN on the toy, two samples; mu = mu_rel times a
    norm that grows by e^growth per layer (amplifying value maps)."""
    layer = np.repeat(np.arange(n_layers + 1), 2)
    rows = pd.DataFrame(
        {
            "layer": layer,
            "sample": np.tile([0, 1], n_layers + 1),
            "value": np.exp(slope * layer),
            "at_floor": False,
        }
    )
    mu = rows.assign(metric="mu", value=rows["value"] * np.exp(growth * layer))
    both = pd.concat([mu, rows.assign(metric="mu_rel")])
    return both.assign(model="toy", init="random", variant="san", mask=mask, mode=mode)


def diverged(mask: str) -> pd.DataFrame:
    row = {"model": "toy", "init": "random", "variant": "san", "mask": mask, "mode": "eval"}
    row |= {"layer": np.nan, "sample": np.nan, "metric": "diverged", "value": 1.0}
    return pd.DataFrame([{**row, "at_floor": False}])


def table(*curves: pd.DataFrame) -> pd.DataFrame:
    return pd.concat(curves, ignore_index=True)


CASES = {
    # complete (radius 1) collapses 4x faster than the window (radius 4 at 8 tokens)
    # passing: the value maps amplify (mu grows by e^3 per layer, like SmolLM2's), mu_rel falls
    "san-collapses-every-mask": Case(
        passing=table(curve("complete", -2.0, growth=3.0), curve("window:1", -0.5, growth=3.0)),
        failing=table(curve("complete", -2.0), diverged("window:1")),
        overrides=OVERRIDES,
        untested=table(curve("complete", -2.0)),  # window:1 never ran
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
REAL = {"models": ["minilm"], "masks": ["complete", "window:1"], "n_tokens": 8}


def minilm(*curves: pd.DataFrame) -> pd.DataFrame:
    return table(*(c.assign(model="minilm", init="pretrained") for c in curves))


# train mode (dropout on the attention probabilities) is measured, but excluded by name
WITH_TRAIN = minilm(
    curve("complete", -2.0),
    curve("window:1", -0.5),
    curve("complete", -0.5, mode="train"),
    curve("window:1", -0.6, mode="train"),
)
REVERSED = minilm(curve("complete", -0.4), curve("window:1", -0.5))
CASES |= {
    "local-masks-slower@minilm/eval": Case(WITH_TRAIN, REVERSED, REAL),
    "rate-follows-radius@minilm/eval": Case(WITH_TRAIN, REVERSED, REAL),
}
