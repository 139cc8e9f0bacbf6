"""toy-collapse: hand-made residual curves (3 layers, two seeds, two sequences)."""

import pandas as pd
from _case import Case

OVERRIDES = {"n_layers": 3, "seeds": [0, 1]}
FLOOR = 1e-15  # float64's floor (10 x machine epsilon) rounded up

CURVES = {
    "san": [0.5, 0.125, 2e-3, 8e-9],  # q = 0.25, 0.016, 4e-6: factors shrink (cubic)
    "san+skip": [0.5, 0.45, 0.4, 0.35],
    "san+mlp": [0.5, 0.1, 1e-4, 1e-9],
    "san+ln": [0.5, 0.1, 1e-4, 1e-9],
    "transformer": [0.5, 0.48, 0.46, 0.44],
}


def table(**changes: list[float]) -> pd.DataFrame:
    rows = [
        (variant, seed, layer, sample, "res_comp_rel", value * (1 + 0.1 * sample), value < FLOOR)
        for variant, values in {**CURVES, **changes}.items()
        for seed in (0, 1)
        for layer, value in enumerate(values)
        for sample in (0, 1)
    ]
    columns = ["variant", "seed", "layer", "sample", "metric", "value", "at_floor"]
    return pd.DataFrame(rows, columns=columns)


CASES = {
    "san-doubly-exponential": Case(
        passing=table(),
        failing=table(san=[0.5, 0.25, 0.125, 0.0625]),  # constant factor 1/2: only exponential
        overrides=OVERRIDES,
    ),
    "skip-keeps-residual": Case(
        passing=table(),
        failing=table(transformer=[0.5, 0.1, 1e-2, 1e-4]),  # a skip variant that collapses
        overrides=OVERRIDES,
    ),
    "mlp-ln-do-not-prevent": Case(
        passing=table(),
        failing=table(**{"san+ln": [0.5, 0.4, 0.3, 0.2]}),  # LayerNorm that stops the collapse
        overrides=OVERRIDES,
    ),
}
