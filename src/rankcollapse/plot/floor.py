"""A figure's dtype floor, without matplotlib or torch: the parent of a figure process
(`rankcollapse.cli`) resolves a dtype's floor here and sends the plain value and label.

Example:
    >>> floor_of(1e-6)
    Floor(value=1e-06, label='at the dtype floor', points=[])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Floor:
    """Where a figure's floor markers go: the dtype's floor value, else the axis bottom; its
    legend label names the dtype."""

    value: float | None
    label: str
    points: list = field(default_factory=list)  # (ax, xs, k, n, colour)


def floor_of(floor: Any) -> Floor:
    """A floor given as a torch dtype, a number, None (value unknown) or a Floor (copied
    without its points: how a process without torch gets a dtype's floor)."""
    if isinstance(floor, Floor):
        return Floor(floor.value, floor.label)
    if floor is None:
        return Floor(None, "at the dtype floor")
    if isinstance(floor, (int, float)):
        return Floor(float(floor), "at the dtype floor")
    from rankcollapse.metrics import dtype_floor

    return Floor(dtype_floor(floor), f"at the {str(floor).removeprefix('torch.')} floor")
