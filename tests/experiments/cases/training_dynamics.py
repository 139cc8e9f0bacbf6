"""Hand-made tables for training-dynamics: four arms, one seed, a 2-layer model measured at
steps 0 and 100 (the last layer's res_comp_rel) with the training loss of steps 1-50 and
51-100 (the early part: the first 25% of 200 steps, i.e. steps up to 50)."""

from __future__ import annotations

import pandas as pd
from _case import Case

OVERRIDES = {"n_layers": 2, "steps": 200, "every": 50, "seeds": [0]}


def table(arms: dict[str, tuple[float, float, float]]) -> pd.DataFrame:
    """arm -> (initial res_comp_rel, final res_comp_rel, early loss) of the last layer."""
    rows = []
    for arm, (initial, final, early) in arms.items():
        for step, value in ((0, initial), (200, final)):
            for sample in (0, 1):  # the samples spread around the arm's value
                rows.append({"arm": arm, "seed": 0, "step": step, "layer": 2,
                             "variant": "transformer", "sample": sample, "metric": "res_comp_rel",
                             "value": value * (0.9 if sample == 0 else 1.1), "at_floor": False})  # fmt: skip
        for step, loss in ((50, early), (200, early - 1.0)):
            rows.append(
                {"arm": arm, "seed": 0, "step": step, "metric": "train_loss", "value": loss}
            )
    return pd.DataFrame(rows)


# the no-skip arm starts collapsed and learns slowest; post-LN and hot sit between
ORDERED = {"pre-ln": (0.7, 0.8, 2.8), "post-ln": (0.65, 0.85, 2.9), "no-skip": (0.1, 1e-3, 3.2),
           "hot": (0.68, 0.7, 2.85)}  # fmt: skip
# the collapsed start learns fastest: the association is reversed
REVERSED = {**ORDERED, "no-skip": (0.1, 1e-3, 2.5), "pre-ln": (0.7, 0.8, 3.1)}
# without skips the trained network ends above the post-LN arm
RECOVERED = {**ORDERED, "no-skip": (0.1, 0.9, 3.2)}

CASES = {
    "collapsed-start-trains-slower": Case(table(ORDERED), table(REVERSED), OVERRIDES),
    "no-skip-stays-collapsed": Case(table(ORDERED), table(RECOVERED), OVERRIDES),
}
