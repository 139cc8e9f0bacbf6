"""dong2021-bounds: one hand-made sequence per variant, two layers (log10 values per layer)."""

import math

import pandas as pd
from _case import Case

OVERRIDES = {"n_layers": 2, "seeds": [0], "levels": [0.5]}
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


def table(san=None, skip=None) -> pd.DataFrame:
    rows = sequence("san", **{**CUBIC, **(san or {})})
    rows += sequence("san+skip", **{**SKIP, **(skip or {})})
    columns = ["variant", "seed", "level", "layer", "sample", "metric", "value", "at_floor"]
    return pd.DataFrame(rows, columns=columns)


CASES = {
    "cubic-contraction": Case(
        passing=table(),  # log ratios 3.0 and 2.99
        failing=table(san={"rel": [0.05, 0.01, 0.002]}),  # ratios 1.5 and 1.35: exponential only
        overrides=OVERRIDES,
    ),
    "bound-holds": Case(
        passing=table(),  # margins 1 and 2 decades at layer 1, 2 and 3 at layer 2
        failing=table(san={"one_step": [NAN, -3, -13]}),  # layer 2: bound 1 decade below r_2
        overrides=OVERRIDES,
    ),
    "skip-keeps-residual": Case(
        passing=table(skip={"log10_r": [-1, -1.3, -1.6]}),  # lost 0.6 decades over 2 layers
        # a skip network that loses 1.5 decades over 2 layers: still 7 decades above the
        # pure-SAN bound, but not kept
        failing=table(skip={"log10_r": [-1, -1.8, -2.5]}),
        overrides=OVERRIDES,
    ),
}
