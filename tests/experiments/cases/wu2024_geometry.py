"""wu2024-geometry findings on a hand-made pretrained model `minilm` (full rank 8), two windows."""

from __future__ import annotations

import numpy as np
import pandas as pd
from _case import Case

OVERRIDES = {"models": ["minilm"]}


def model_rows(
    cos_by_layer,
    rank_by_layer,
    min_sv_rel=1e-2,
    *,
    model="minilm",
    init="pretrained",
    window_1=None,
    repeated=(0, 0),
):
    """Two windows per layer: mean |cos|, numerical rank and sigma_min / sigma_max; window 1
    takes the values in `window_1` ({metric: per-layer list}) where given; `repeated`: each
    window's repeated leading rows."""
    rows = []
    ids = {"model": model, "init": init, "index": np.nan, "at_floor": False, "full_rank": 8}
    for sample in (0, 1):
        for layer, (cos, rank) in enumerate(zip(cos_by_layer, rank_by_layer, strict=True)):
            values = {
                "abs_cos_mean": cos,
                "numerical_rank": rank,
                "min_sv_rel": min_sv_rel,
                "stable_rank": 2.0,
                "min_sv": 1.0,
                "mu_rel": 0.5,
            }
            if sample == 1:
                values |= {k: v[layer] for k, v in (window_1 or {}).items()}
            for metric, value in values.items():
                row = {"layer": layer, "sample": sample, "metric": metric, "value": value}
                rows.append({**ids, **row})
        row = {"layer": 0, "sample": sample, "metric": "repeated_leading_rows"}
        rows.append({**ids, **row, "value": float(repeated[sample])})
    return pd.DataFrame(rows)


GOOD = model_rows([0.1, 0.2, 0.3, 0.5], [5, 8, 8, 8])  # layer 0's rank is not a block's
# the audit's SmolLM2: a window starting [198, 198] is rank-deficient at every layer; it is
# left out (and said so), so the finding passes on the others
DEGENERATE = {"numerical_rank": [7, 7, 7, 7], "min_sv_rel": [1e-9] * 4}
WITH_DEGENERATE = model_rows([0.1, 0.2, 0.3, 0.5], [5, 8, 8, 8], window_1=DEGENERATE,
                             repeated=(0, 1))  # fmt: skip

CASES = {
    "full-rank@minilm": Case(
        WITH_DEGENERATE,
        model_rows([0.1, 0.2, 0.3], [8, 8, 8], window_1={"numerical_rank": [8, 7, 8]}),
        OVERRIDES,
    ),
    # failing: one window's sigma ratio falls to 1e-6 at one layer; the median stays at 1e-2
    "min-sv-away@minilm": Case(
        WITH_DEGENERATE,
        model_rows([0.1, 0.2, 0.3], [8, 8, 8], window_1={"min_sv_rel": [1e-2, 1e-2, 1e-6]}),
        OVERRIDES,
    ),
    # failing: a curve that wanders (Spearman 0.2 over the blocks), not one that rises
    "cos-grows@minilm": Case(
        GOOD, model_rows([0.2, 0.25, 0.22, 0.3, 0.21, 0.24], [8] * 6), OVERRIDES
    ),
}
