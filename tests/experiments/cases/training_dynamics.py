"""Hand-made tables for training-dynamics: four arms, two seeds (the units), a 2-layer model at
steps 0 and 100 (the last layer's res_comp_rel) with the training loss of steps 1-50 and
51-100 (the early part: the first 25% of 200 steps, i.e. steps up to 50)."""

from __future__ import annotations

import pandas as pd
from _case import Case

OVERRIDES = {"n_layers": 2, "steps": 200, "every": 50, "seeds": [0, 1]}


def table(*seeds: dict[str, tuple[float, float, float]]) -> pd.DataFrame:
    """Per seed (0, 1, ...), arm -> (initial res_comp_rel, final res_comp_rel, early loss) of
    the last layer; one mapping is used for both seeds."""
    seeds = seeds * 2 if len(seeds) == 1 else seeds
    return pd.concat([_seed(seed, arms) for seed, arms in enumerate(seeds)], ignore_index=True)


def _seed(seed: int, arms: dict[str, tuple[float, float, float]]) -> pd.DataFrame:
    rows = []
    for arm, (initial, final, early) in arms.items():
        for step, value in ((0, initial), (200, final)):
            for sample in (0, 1):  # the samples spread around the arm's value
                rows.append({"arm": arm, "seed": seed, "step": step, "layer": 2,
                             "variant": "transformer", "sample": sample, "metric": "res_comp_rel",
                             "value": value * (0.9 if sample == 0 else 1.1), "at_floor": False})  # fmt: skip
        for step, loss in ((50, early), (200, early - 1.0)):
            rows.append(
                {"arm": arm, "seed": seed, "step": step, "metric": "train_loss", "value": loss}
            )
    return pd.DataFrame(rows)


# the no-skip arm starts collapsed and learns slowest; post-LN and hot sit between
ORDERED = {"pre-ln": (0.7, 0.8, 2.8), "post-ln": (0.65, 0.85, 2.9), "no-skip": (0.1, 1e-3, 3.2),
           "hot": (0.68, 0.7, 2.85)}  # fmt: skip
# the collapsed start learns fastest: the association is reversed
REVERSED = {**ORDERED, "no-skip": (0.1, 1e-3, 2.5), "pre-ln": (0.7, 0.8, 3.1)}
# without skips the trained network ends above the post-LN arm
RECOVERED = {**ORDERED, "no-skip": (0.1, 0.9, 3.2)}

CASES = {  # untested: the two seeds disagree, the interval straddles the margin
    "collapsed-start-trains-slower": Case(
        table(ORDERED), table(REVERSED), OVERRIDES, untested=table(ORDERED, REVERSED)
    ),
    "no-skip-stays-collapsed": Case(
        table(ORDERED), table(RECOVERED), OVERRIDES, untested=table(ORDERED, RECOVERED)
    ),
}
