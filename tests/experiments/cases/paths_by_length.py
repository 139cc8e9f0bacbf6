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


CASES = {
    "long-products-near-rank-one": Case(
        passing=table(),
        failing=table(minilm=(0.1, 0.2, 0.3)),  # longer products further from rank 1
        overrides=OVERRIDES,
    ),
}
