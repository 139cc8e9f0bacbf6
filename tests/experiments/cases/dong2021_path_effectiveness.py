"""Hand-made results of dong2021-path-effectiveness: one task (sorting, L = 6), two seeds."""

from __future__ import annotations

import pandas as pd
from _case import Case

PEAKED = [0.3, 0.9, 0.8, 0.6, 0.4, 0.35, 0.42]  # accuracy at k = 0..6: short paths best


def table(
    curve: list[float] = PEAKED,
    *,
    more: float = 0.02,
    full: float = 0.99,
    majority: float = 0.2,
    position_majority: float = 0.4,
    task: str = "sorting",
    seeds: tuple[int, ...] = (0, 1),
) -> pd.DataFrame:
    """Tidy rows of `task`: 5 paths give `curve` at k = 0..L, 20 paths `curve + more` at k >= 1
    (k = 0 is one route whatever n_paths), the same for every seed."""
    rows = []
    for seed in seeds:
        rows += [
            (seed, "full", None, None, None, "accuracy", full),
            (seed, "baseline", None, None, None, "random", 0.1),
            (seed, "baseline", None, None, None, "majority", majority),
            (seed, "baseline", None, None, None, "position_majority", position_majority),
        ]
        for n_paths, extra in ((5, 0.0), (20, more)):
            rows += [
                (seed, "paths", n_paths, k, 0, "accuracy", value + (extra if k else 0.0))
                for k, value in enumerate(curve)
            ]
    columns = ["seed", "kind", "n_paths", "length", "repeat", "metric", "value"]
    return pd.DataFrame(rows, columns=columns).assign(task=task, device="cpu")


def with_length(k: int, value: float) -> list[float]:
    curve = list(PEAKED)
    curve[k] = value
    return curve


ONE_TASK = {"tasks": ["sorting"]}
# the audit's paper run: the full model at 1.00, the best path subset at the per-position prior
AT_PRIOR = table([0.3, 0.38, 0.36, 0.33, 0.3, 0.25, 0.16], full=1.0, position_majority=0.4)
CASES = {
    "sorting:full-learned": Case(table(), table(full=0.7), ONE_TASK),
    # failing: the best length is 3 (longer than 2)
    "sorting:best-short": Case(table(), table(with_length(3, 0.95)), ONE_TASK, untested=AT_PRIOR),
    # failing: the longest paths keep 0.7, far above the per-position prior 0.4; or 0.16,
    # far below it (the audit's sorting run: -0.24)
    "sorting:long-near-baseline": Case(
        table(), table(with_length(6, 0.16)), ONE_TASK, untested=AT_PRIOR
    ),
    # failing: 20 paths do 0.01 worse than 5 at k = 1, 2
    "sorting:more-paths-help": Case(table(), table(more=-0.01), ONE_TASK, untested=AT_PRIOR),
    # failing: a path subset (k = 1, 20 paths: 0.99) beats the full model (0.985)
    "sorting:full-beats-paths": Case(
        table(), table(with_length(1, 0.97), full=0.985), ONE_TASK, untested=AT_PRIOR
    ),
}
