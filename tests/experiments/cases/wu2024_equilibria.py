"""wu2024-equilibria's finding on hand-made stability rows: final numerical ranks of random
inputs, four per size; N = 3 and N = 4 (both >= 3, so both must have small basins)."""

from __future__ import annotations

import pandas as pd
from _case import Case

OVERRIDES = {"n_tokens": [3, 4]}


def random_ends(ranks: dict[int, list[int]]) -> pd.DataFrame:
    """Final numerical rank of each random input, per N."""
    return pd.DataFrame(
        [{"part": "stability", "start": "random", "rank": n, "sample": i,
          "metric": "numerical_rank", "value": float(r), "n_tokens": n, "w": float(n)}
         for n, finals in ranks.items() for i, r in enumerate(finals)]
    )  # fmt: skip


CASES = {
    "thm3-small-basins": Case(
        passing=random_ends({3: [1, 1, 1, 2], 4: [1, 1, 1, 1]}),  # 25% and 0% keep rank 2
        failing=random_ends({3: [1, 1, 1, 2], 4: [2, 2, 3, 1]}),  # 75% at N = 4
        overrides=OVERRIDES,
    ),
}
