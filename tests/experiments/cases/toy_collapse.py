"""toy-collapse: hand-made residual curves (3 layers, two seeds, two sequences)."""

import pandas as pd
from _case import Case

OVERRIDES = {"n_layers": 3, "seeds": [0, 1]}
FLOOR = 1e-15  # float64's floor (10 x machine epsilon) rounded up

CURVES = {
    "san": [0.5, 0.125, 2e-3, 8e-9],  # q = 0.25, 0.016, 4e-6: factors shrink (cubic)
    "san+skip": [0.5, 0.35, 0.245, 0.17],  # x0.7 per layer, as the audit measured: slow
    "san+mlp": [0.5, 0.1, 1e-4, 1e-10],  # q = 0.2, 1e-3, 1e-6: still doubly exponential
    "san+ln": [0.5, 0.2, 5e-3, 4e-8],  # within a decade of pure SAN at every layer
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
        # the transformer loses 70% in one layer, though it ends at 0.04 (well above 1e-3)
        failing=table(transformer=[0.5, 0.15, 0.06, 0.04]),
        overrides=OVERRIDES,
    ),
    "mlp-does-not-prevent": Case(
        passing=table(),
        failing=table(**{"san+mlp": [0.5, 0.1, 1e-3, 1e-5]}),  # the MLP keeps 1e-5 at the end
        overrides=OVERRIDES,
    ),
    "mlp-doubly-exponential": Case(
        passing=table(),
        failing=table(**{"san+mlp": [0.5, 0.05, 5e-3, 5e-4]}),  # x0.1 per layer: exponential
        overrides=OVERRIDES,
    ),
    # failing: the audit's measurement, san+ln 7 decades above pure SAN at layer 3
    "ln-plays-no-role": Case(
        passing=table(),
        failing=table(**{"san+ln": [0.5, 0.3, 0.15, 0.08]}),
        overrides=OVERRIDES,
    ),
}
