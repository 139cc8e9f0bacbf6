"""dong2021-bounds: hand-made sequences per variant and seed, two layers (log10 values per
layer); the units are the seeds (cubic-contraction) and the sequences (skip-keeps-residual)."""

import math

import pandas as pd
from _case import Case

OVERRIDES = {"n_layers": 2, "seeds": [0, 1], "levels": [0.5], "skip_levels": [10.0]}
NAN = math.nan


def sequence(
    variant: str, *, rel, log10_r, one_step, unrolled, floor=(False,) * 3, seed: int = 0
) -> list:
    rows = [(variant, seed, 0.5, 0, 0, "informative", 1.0, False),
            (variant, seed, 0.5, 0, 0, "c", 10.0, False)]  # fmt: skip
    for layer in range(3):
        for metric, values in (("res_comp_rel", rel), ("log10_r", log10_r),
                               ("log10_one_step", one_step), ("log10_unrolled", unrolled)):  # fmt: skip
            rows.append((variant, seed, 0.5, layer, 0, metric, values[layer], floor[layer]))
    return rows


CUBIC = {"rel": [0.05, 1.25e-4, 2e-12], "log10_r": [-1, -4, -12],
         "one_step": [NAN, -3, -10], "unrolled": [-1, -3, -9]}  # fmt: skip
SKIP = {"rel": [0.05] * 3, "log10_r": [-1, -1, -1], "one_step": [NAN, -3, -3],
        "unrolled": [-1, -3, -9]}  # fmt: skip


def collapse_inputs(log10_r, pure, seed: int, spread: float) -> list:
    """san+skip at level 10 (sqrt(c) r_0 > 1) and the pure SAN of its weights there; two
    sequences, the second `spread` decades above the first at the last layer."""
    return [("san+skip", seed, 10.0, layer, sample, metric,
             values[layer] + spread * (sample - 1) * (layer == 2), False)
            for metric, values in (("log10_r", log10_r), ("log10_r_pure", pure))
            for layer in range(3) for sample in (1, 2)]  # fmt: skip


def table(san=None, skip=None, escaped=(1.5, 1.3, 1.2), pure=(1.5, -3, -12), seeds=(0, 1),
          san_1=None, spread=0.1) -> pd.DataFrame:  # fmt: skip
    """Every seed alike, but seed 1's pure SAN from `san_1` when given."""
    rows = []
    for seed in seeds:
        rows += sequence("san", **{**CUBIC, **((san_1 if seed else None) or san or {})}, seed=seed)
        rows += sequence("san+skip", **{**SKIP, **(skip or {})}, seed=seed)
        rows += collapse_inputs(escaped, pure, seed, spread)
    columns = ["variant", "seed", "level", "layer", "sample", "metric", "value", "at_floor"]
    return pd.DataFrame(rows, columns=columns)


CASES = {
    "cubic-contraction": Case(
        passing=table(),  # log ratios 3.0 and 2.99
        failing=table(san={"rel": [0.05, 0.01, 0.002]}),  # ratios 1.5 and 1.35: exponential only
        overrides=OVERRIDES,
        # the seeds disagree: seed 1 contracts quadratically (ratios 2), |2 - 3| = 1
        untested=table(san_1={"rel": [0.05, 0.0025, 6.25e-6]}),
    ),
    # pure SAN of the same weights loses 13.5 decades on the skip's inputs
    "skip-keeps-residual": Case(
        passing=table(),  # the skip loses 0.3 decades over 2 layers
        # a skip scaled down (X/10 + SA(X), a mis-set skip_scale) loses 2 decades: not kept
        failing=table(escaped=(1.5, 0.4, -0.5)),
        overrides=OVERRIDES,
        # one seed's two sequences, 0.8 decades lost and 0.2 gained: they straddle a tenth
        untested=table(escaped=(1.5, 1.3, 0.7), seeds=(0,), spread=1.0),
    ),
}
