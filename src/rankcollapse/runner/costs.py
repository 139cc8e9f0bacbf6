"""What units cost: each unit's expected seconds from the times of units already run, and the
wall time of dealing units to workers. Used by dry runs (the estimate) and by real runs (the
longest units start first), so both read times the same way.

A unit's time is taken as a product of one factor per (field, value) but the seed, fitted to
the known units' times by least squares on their logarithms:

    log seconds(unit) = c + sum over its fields f of b[f, unit[f]]

so a deep model's unit under a mask no deep unit ran is the deep unit's time scaled by what
that mask costs in the other models. A unit that was run keeps its time (the mean of its runs);
a unit whose terms the known units do not determine (a value no known unit has) is estimated at
the mean time of the known units that share the most (field, value) pairs with it; NaN when no
unit is known.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
import heapq
from collections.abc import Sequence


from rankcollapse.lazy import lazy_module
from rankcollapse.experiments import Unit
from rankcollapse.files import canonical_json

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")


def unit_seconds(units: Sequence[Unit], known: Sequence[tuple[Unit, float]]) -> list[float]:
    """Per unit of `units`, its seconds from the `known` (unit, seconds) pairs (module doc).

    Example:
        >>> units = [{"m": m, "k": k} for m in ("small", "big") for k in ("a", "b")]
        >>> known = [(units[0], 1.0), (units[1], 3.0), (units[2], 10.0), ({"m": "x"}, 5.0)]
        >>> [round(s, 6) for s in unit_seconds(units, known)]
        [1.0, 3.0, 10.0, 30.0]
    """
    if not known:
        return [float("nan")] * len(units)
    runs: dict[str, list[float]] = {}
    for unit, seconds in known:
        runs.setdefault(canonical_json(unit), []).append(seconds)
    fitted = _fitted(units, known)
    known_pairs = [(unit_pairs(unit), seconds) for unit, seconds in known]
    estimate = []
    for i, unit in enumerate(units):
        if canonical_json(unit) in runs:
            estimate.append(float(np.mean(runs[canonical_json(unit)])))
        elif i in fitted:
            estimate.append(fitted[i])
        else:
            shared = [(len(unit_pairs(unit) & pairs), s) for pairs, s in known_pairs]
            most = max(n for n, _ in shared)
            estimate.append(float(np.mean([s for n, s in shared if n == most])))
    return estimate


def makespan(seconds: Sequence[float], workers: int) -> float:
    """When the last of `seconds` ends if each goes, in order, to the first free worker.

    Example:
        >>> makespan([3.0, 1.0, 1.0, 1.0], 2)
        3.0
    """
    free = [0.0] * workers
    for s in seconds:
        heapq.heappush(free, heapq.heappop(free) + s)
    return max(free)


def longest_first(seconds: float) -> tuple[int, float]:
    """Sort key of the order units start in on several workers: units of unknown (NaN) time
    first, in list order, then the longest first."""
    return (0, 0.0) if np.isnan(seconds) else (1, -seconds)


def unit_pairs(unit: Unit) -> set[tuple[str, str]]:
    """The unit's (field, value) pairs, values as canonical JSON."""
    return {(key, canonical_json(value)) for key, value in unit.items()}


def _fitted(units: Sequence[Unit], known: Sequence[tuple[Unit, float]]) -> dict[int, float]:
    """Per unit whose time the known units determine: exp(c + sum of b[f, value]), the least-
    squares fit of log seconds over the known units (module doc). Determined: every term of the
    unit is in a known unit and its row lies in the span of the known units' rows."""
    terms = sorted(set().union(*(_cost_terms(unit) for unit, _ in known)))
    column = {term: k for k, term in enumerate(terms, start=1)}

    def row(unit: Unit) -> np.ndarray | None:
        if not _cost_terms(unit) <= column.keys():
            return None
        x = np.zeros(len(terms) + 1)
        x[[0, *(column[term] for term in _cost_terms(unit))]] = 1.0
        return x

    design = np.array([row(unit) for unit, _ in known])
    logs = np.log([max(seconds, 1e-6) for _, seconds in known])
    coef = np.linalg.lstsq(design, logs, rcond=None)[0]
    _, sv, vt = np.linalg.svd(design, full_matrices=False)
    span = vt[sv > sv[0] * 1e-9]
    fitted = {}
    for i, unit in enumerate(units):
        x = row(unit)
        if x is not None and np.linalg.norm(x - span.T @ (span @ x)) < 1e-6:
            fitted[i] = float(np.exp(x @ coef))
    return fitted


def _cost_terms(unit: Unit) -> set[tuple[str, str]]:
    """The (field, value) pairs that may change a unit's cost: all but the seed."""
    return {pair for pair in unit_pairs(unit) if pair[0] != "seed"}
