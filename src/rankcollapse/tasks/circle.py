"""Circle task (Dong et al. 2021, Sec. 6 toy): map a pair of points on a circle to the next pair.

`n_points` points are spaced evenly on a circle of radius `radius` around the origin. Sample i is
the pair (point i, point i + n_points/2), two opposite points: two tokens in the plane; its
target is the pair one step further round the circle, (point i+1, point i+1 + n_points/2). A
model of the step applied to its own output then walks both tokens round the circle; rank
collapse shows as the two trajectories merging.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from rankcollapse.errors import ConfigError


@dataclass(frozen=True)
class CircleData:
    """Pairs of points and their successors.

    Attributes:
        inputs: float32 (b, 2, 2): sample, token (the two points), coordinate.
        targets: float32 (b, 2, 2): the same pairs one step further round the circle.
        radius: the circle's radius.
    """

    inputs: Tensor
    targets: Tensor
    radius: float

    def __len__(self) -> int:
        return int(self.inputs.shape[0])

    def baselines(self) -> dict[str, float]:
        """Mean squared error of the two trivial predictors, measured on this data.

        - "stay": predict the input pair unchanged.
        - "centre": predict both points at the circle's centre (the origin).
        """
        return {
            "stay": float(((self.inputs - self.targets) ** 2).double().mean()),
            "centre": float((self.targets**2).double().mean()),
        }


def circle_data(n_points: int = 1000, *, radius: float = 0.3) -> CircleData:
    """Every pair of opposite points of an evenly spaced circle and its successor pair.

    Deterministic (no seed): the points are evenly spaced, as in the authors' code.

    Example:
        >>> data = circle_data(8, radius=1.0)
        >>> len(data), data.inputs[0].tolist()
        (4, [[1.0, 0.0], [-1.0, 0.0]])
    """
    if n_points < 4 or n_points % 2:
        raise ConfigError(
            f"circle: n_points must be even and >= 4 (pairs of opposite points), got {n_points}."
        )
    if not radius > 0:
        raise ConfigError(f"circle: radius must be > 0, got {radius}.")
    angles = torch.arange(n_points + 1, dtype=torch.float64) * (2 * math.pi / n_points)
    points = radius * torch.stack([angles.cos(), angles.sin()], dim=-1)  # (n_points + 1, 2)
    points = torch.where(points.abs() < 1e-12, torch.zeros_like(points), points)
    half = n_points // 2
    first = torch.arange(half)
    inputs = torch.stack([points[first], points[first + half]], dim=1)  # (half, 2, 2)
    targets = torch.stack([points[first + 1], points[first + 1 + half]], dim=1)
    return CircleData(inputs.float(), targets.float(), radius)
