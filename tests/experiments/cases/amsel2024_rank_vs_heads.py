"""Hand-made tables for amsel2024-rank-vs-heads: d = 8, the quick grid (r, H) = (1, 8),
(1, 32), (2, 4), (2, 16), (8, 1), (8, 4), three seeds; held-out errors and the full-rank head's
alignment of W_Q^T W_K with -I. The units are the seeds whose full-rank head learned."""

from __future__ import annotations

import pandas as pd
from _case import Case

OVERRIDES = {"d_models": [8], "seeds": [0, 1, 2]}
LOW = {(1, 8): 0.6, (1, 32): 0.3, (2, 4): 0.5, (2, 16): 0.2, (8, 4): 0.05}
Three = tuple[float, float, float]


def table(full: Three, cosine: Three) -> pd.DataFrame:
    """The full-rank head's error and cosine for seeds 0, 1 and 2; the other configurations'
    errors from LOW (seed s: +0.05 s)."""
    rows = []
    for seed in (0, 1, 2):
        ids = {"d_model": 8, "seed": seed, "step": float("nan")}
        for (r, h), error in LOW.items():
            rows.append({**ids, "d_qk": r, "n_heads": h, "metric": "eval_rel_mse",
                         "value": error + 0.05 * seed})  # fmt: skip
        rows.append({**ids, "d_qk": 8, "n_heads": 1, "metric": "eval_rel_mse", "value": full[seed]})
        rows.append({**ids, "d_qk": 8, "n_heads": 1, "metric": "qk_alignment",
                     "value": cosine[seed]})  # fmt: skip
    return pd.DataFrame(rows)


# seeds 0 and 1 learn (0.01 and 0.012: 0.02 x the best split, 0.05 x the best low rank); seed
# 2's head settles in the +I basin (0.6, cosine 0.2): named and left out
GOOD = table(full=(0.01, 0.012, 0.6), cosine=(0.95, 0.952, 0.2))
# only seed 2 learned: fewer than two units
UNLEARNED = table(full=(0.9, 0.95, 0.3), cosine=(0.3, 0.2, 0.95))

CASES = {
    # failing: full rank only 0.2 x the best split (log10 -0.7, not below -1)
    "full-rank-wins": Case(
        GOOD, table(full=(0.1, 0.11, 0.6), cosine=(0.95, 0.96, 0.2)), OVERRIDES, UNLEARNED
    ),
    # failing: 16 rank-2 heads beat the full-rank head (0.2 against 0.3)
    "more-heads-do-not-close-gap": Case(
        GOOD, table(full=(0.3, 0.375, 0.6), cosine=(0.95, 0.952, 0.2)), OVERRIDES, UNLEARNED
    ),
    "full-rank-aligns": Case(
        GOOD, table(full=(0.01, 0.012, 0.6), cosine=(0.5, 0.55, 0.99)), OVERRIDES, UNLEARNED
    ),
}
