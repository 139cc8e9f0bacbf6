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
MLP_GAIN = [0.5, 0.2, 5e-3, 1e-6]  # san+mlp at mlp_gain 4: behind the gain-1 arm (slower)


def table(
    gain: list[float] = MLP_GAIN, seeds: tuple[int, ...] = (0, 1), **changes: list[float]
) -> pd.DataFrame:
    """Every variant's curve for each of `seeds` (the unit of every finding), two sequences."""
    curves = [(variant, 1.0, values) for variant, values in {**CURVES, **changes}.items()]
    rows = [
        (variant, gain_, seed, layer, sample, "res_comp_rel", value * (1 + 0.1 * sample),
         value < FLOOR)
        for variant, gain_, values in [*curves, ("san+mlp", 4.0, gain)]
        for seed in seeds
        for layer, value in enumerate(values)
        for sample in (0, 1)
    ]  # fmt: skip
    columns = ["variant", "mlp_gain", "seed", "layer", "sample", "metric", "value", "at_floor"]
    return pd.DataFrame(rows, columns=columns)


ONE_SEED = table(seeds=(0,))  # a run of one seed: no spread over the units, nothing decided
CASES = {
    "san-doubly-exponential": Case(
        passing=table(),
        failing=table(san=[0.5, 0.25, 0.125, 0.0625]),  # constant factor 1/2: only exponential
        overrides=OVERRIDES,
        untested=ONE_SEED,
    ),
    "skip-keeps-residual": Case(
        passing=table(),
        # the transformer loses 70% in one layer, though it ends at 0.04 (well above 1e-3)
        failing=table(transformer=[0.5, 0.15, 0.06, 0.04]),
        overrides=OVERRIDES,
        untested=ONE_SEED,
    ),
    "mlp-does-not-prevent": Case(
        passing=table(),
        failing=table(**{"san+mlp": [0.5, 0.1, 1e-3, 1e-5]}),  # the MLP keeps 1e-5 at the end
        overrides=OVERRIDES,
        untested=ONE_SEED,
    ),
    "mlp-doubly-exponential": Case(
        passing=table(),
        failing=table(**{"san+mlp": [0.5, 0.05, 5e-3, 5e-4]}),  # x0.1 per layer: exponential
        overrides=OVERRIDES,
        untested=ONE_SEED,
    ),
    # failing: the gain-4 arm ends 4 decades below the gain-1 arm (what a gain applied to the
    # wrong weights, e.g. W_1 before a saturating tanh, can give)
    "mlp-larger-lambda-slower": Case(
        passing=table(),  # layer 3: 1e-6 against 1e-10, +4 decades
        failing=table(gain=[0.5, 0.05, 1e-5, 1e-14]),
        overrides=OVERRIDES,
        untested=ONE_SEED,
    ),
    # failing: san+ln keeps 0.08 at layer 3, as a norm that brings a skip in (pre-LN with
    # X + SA(LN(X))) or Wu's constructed equilibria would
    "ln-does-not-prevent": Case(
        passing=table(),  # san+ln ends at 4e-8
        failing=table(**{"san+ln": [0.5, 0.3, 0.15, 0.08]}),
        overrides=OVERRIDES,
        untested=ONE_SEED,
    ),
}
