"""wu2024-geometry findings on a hand-made pretrained model `minilm` (full rank 8)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from _case import Case

OVERRIDES = {"models": ["minilm"]}


def model_rows(cos_by_layer, rank_by_layer, min_sv_rel=1e-2, *, model="minilm", init="pretrained"):
    """One sample per layer: mean |cos|, numerical rank and sigma_min / sigma_max."""
    rows = []
    for layer, (cos, rank) in enumerate(zip(cos_by_layer, rank_by_layer)):
        for metric, value in [("abs_cos_mean", cos), ("numerical_rank", rank),
                              ("min_sv_rel", min_sv_rel), ("stable_rank", 2.0),
                              ("min_sv", 1.0), ("mu_rel", 0.5)]:  # fmt: skip
            rows.append({"model": model, "init": init, "layer": layer, "sample": 0,
                         "index": np.nan, "metric": metric, "value": value,
                         "at_floor": False, "full_rank": 8})  # fmt: skip
    return pd.DataFrame(rows)


GOOD = model_rows([0.1, 0.2, 0.3, 0.5], [5, 8, 8, 8])  # layer 0's rank is not a block's

CASES = {
    "full-rank@minilm": Case(GOOD, model_rows([0.1, 0.2, 0.3], [8, 7, 8]), OVERRIDES),
    "min-sv-away@minilm": Case(GOOD, model_rows([0.1, 0.2, 0.3], [8, 8, 8], 1e-6), OVERRIDES),
    "cos-grows@minilm": Case(GOOD, model_rows([0.5, 0.4, 0.3, 0.2], [8, 8, 8, 8]), OVERRIDES),
}
