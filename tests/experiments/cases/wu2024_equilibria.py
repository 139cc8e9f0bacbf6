"""wu2024-equilibria's finding on hand-made stability rows: final numerical ranks of random
inputs, eight per size (units of the interval); N = 3 and N = 4 (both >= 3, so both must have small basins)."""

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
        # 1 and 0 of 8 inputs keep rank 2: the intervals lie below one half
        passing=random_ends({3: [1, 1, 1, 2, 1, 1, 1, 1], 4: [1] * 8}),
        # a map that preserves rank too well: 7 of 8 keep rank >= 2 at N = 4
        failing=random_ends({3: [1, 1, 1, 2, 1, 1, 1, 1], 4: [2, 2, 3, 1, 2, 2, 4, 2]}),
        # 1 of 4 at N = 3: the interval [-0.24, 0.74] straddles one half
        untested=random_ends({3: [1, 1, 1, 2], 4: [1] * 8}),
        overrides=OVERRIDES,
    ),
}
