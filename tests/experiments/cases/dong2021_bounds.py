"""dong2021-bounds: one hand-made sequence per variant, two layers (log10 values per layer)."""

import math

import pandas as pd
from _case import Case

OVERRIDES = {"n_layers": 2, "seeds": [0], "levels": [0.5], "skip_levels": [10.0]}
NAN = math.nan


def sequence(variant: str, *, rel, log10_r, one_step, unrolled, floor=(False,) * 3) -> list:
    rows = [(variant, 0, 0.5, 0, 0, "informative", 1.0, False),
            (variant, 0, 0.5, 0, 0, "c", 10.0, False)]  # fmt: skip
    for layer in range(3):
        for metric, values in (("res_comp_rel", rel), ("log10_r", log10_r),
                               ("log10_one_step", one_step), ("log10_unrolled", unrolled)):  # fmt: skip
            rows.append((variant, 0, 0.5, layer, 0, metric, values[layer], floor[layer]))
    return rows


CUBIC = {"rel": [0.05, 1.25e-4, 2e-12], "log10_r": [-1, -4, -12],
         "one_step": [NAN, -3, -10], "unrolled": [-1, -3, -9]}  # fmt: skip
SKIP = {"rel": [0.05] * 3, "log10_r": [-1, -1, -1], "one_step": [NAN, -3, -3],
        "unrolled": [-1, -3, -9]}  # fmt: skip


def collapse_inputs(log10_r, pure) -> list:
    """san+skip at level 10 (sqrt(c) r_0 > 1) and the pure SAN of its weights there."""
    return [("san+skip", 0, 10.0, layer, 1, metric, values[layer], False)
            for metric, values in (("log10_r", log10_r), ("log10_r_pure", pure))
            for layer in range(3)]  # fmt: skip


def table(san=None, skip=None, escaped=(1.5, 1.3, 1.2), pure=(1.5, -3, -12)) -> pd.DataFrame:
    rows = sequence("san", **{**CUBIC, **(san or {})})
    rows += sequence("san+skip", **{**SKIP, **(skip or {})})
    rows += collapse_inputs(escaped, pure)
    columns = ["variant", "seed", "level", "layer", "sample", "metric", "value", "at_floor"]
    return pd.DataFrame(rows, columns=columns)


CASES = {
    "cubic-contraction": Case(
        passing=table(),  # log ratios 3.0 and 2.99
        failing=table(san={"rel": [0.05, 0.01, 0.002]}),  # ratios 1.5 and 1.35: exponential only
        overrides=OVERRIDES,
    ),
    # pure SAN of the same weights loses 13.5 decades on the skip's inputs
    "skip-keeps-residual": Case(
        passing=table(),  # the skip loses 0.3 decades over 2 layers
        # a skip scaled down (X/10 + SA(X), a mis-set skip_scale) loses 2 decades: not kept
        failing=table(escaped=(1.5, 0.4, -0.5)),
        overrides=OVERRIDES,
        # the pure SAN loses only 0.5 decades there: the inputs show no collapse to stop
        untested=table(pure=(1.5, 1.2, 1.0)),
    ),
}
