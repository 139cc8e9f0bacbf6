"""paths-by-length: hand-made rank-1 distances of sampled path products (three lengths)."""

import pandas as pd
from _case import Case

OVERRIDES = {"toy_variants": ["san"], "models": ["minilm:pretrained"], "n_layers": 3}


def table(minilm=(0.5, 0.1, 0.01)) -> pd.DataFrame:
    curves = {("toy-san", "random"): (0.4, 0.05, 1e-3), ("minilm", "pretrained"): minilm}
    rows = [
        (model, init, 0, length, path, 0, "rank1_dist", value * (1 + 0.1 * path), False)
        for (model, init), values in curves.items()
        for length, value in enumerate(values, start=1)
        for path in range(3)
    ]
    columns = ["model", "init", "seed", "length", "path", "sample", "metric", "value", "at_floor"]
    return pd.DataFrame(rows, columns=columns)


CASES: dict[str, Case] = {}
CHECKS_ONLY = (
    "products of positive row-stochastic matrices contract towards rank 1 by construction "
    "(Dong et al. 2021, Sec. 2.2), and the decompositions are exact by construction"
)
TABLE = table()  # where the experiment states no finding (instead of running its quick preset)
